#!/usr/bin/env bash
# Starts a throwaway PostgreSQL that accepts TLS connections only, on
# 127.0.0.1, for the tests of the PostgreSQL store's TLS (crates/rag-store-pg/
# tests/tls.rs). The pgvector server of start.sh is built without TLS, so
# this one is Debian's PostgreSQL (apt package postgresql, installed when
# missing); it has no pgvector, and the tests only connect and ask the server
# whether the connection is encrypted.
#
#   scripts/pg/start-tls.sh [DIR]   start (or find running) it; prints DIR
#   scripts/pg/start-tls.sh --stop [DIR]
#
# DIR (default target/pg-tls, see common.sh) holds `port`, a test CA
# (`ca.pem`) that signed the server's certificate (for the name localhost
# only, not 127.0.0.1), and a second CA (`other-ca.pem`) that signed nothing.
# Export PG_TLS_DIR=DIR for the tests.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
stop=0
if [ "${1:-}" = "--stop" ]; then stop=1; shift; fi
dir=""
source "$root/scripts/pg/common.sh"
dir="${1:-${pg_default_dir%/*}/pg-tls}"

find_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true; }
bin="$(find_bin)"
if [ "$stop" = 1 ]; then
  if [ -n "$bin" ] && [ -d "$dir/data" ]; then
    "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1 && "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2
  fi
  rm -f "$dir/port"
  exit 0
fi
if [ -z "$bin" ] || ! command -v openssl >/dev/null 2>&1; then
  echo "pg/start-tls.sh: installing Debian's postgresql and openssl (apt)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends postgresql openssl >&2
  bin="$(find_bin)"
  if [ -z "$bin" ]; then
    echo "pg/start-tls.sh: no PostgreSQL binaries under /usr/lib/postgresql after installing" >&2
    exit 1
  fi
fi
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

if [ -f "$dir/port" ] && "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
  echo "$dir"
  exit 0
fi

# Certificates: a CA, a server certificate it signs for localhost, and an
# unrelated CA. EC P-256 keys, valid for two days.
certs="$dir/certs"
rm -rf "$certs"
mkdir -p "$certs"
ca() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$certs/$1.key" -out "$dir/$1.pem" -days 2 -subj "/CN=$2" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
}
ca ca "ragscope test CA"
ca other-ca "ragscope unrelated CA"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout "$certs/server.key" -out "$certs/server.csr" -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' >"$certs/ext"
openssl x509 -req -in "$certs/server.csr" -CA "$dir/ca.pem" -CAkey "$certs/ca.key" -CAcreateserial \
  -out "$certs/server.pem" -days 2 -extfile "$certs/ext" 2>/dev/null
chmod 600 "$certs/server.key"

if [ "${#as_pg[@]}" -gt 0 ]; then chown -R ragscope-pg "$dir"; fi
if [ ! -f "$dir/data/PG_VERSION" ]; then
  rm -rf "$dir/data"
  "${as_pg[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
fi
# TLS or nothing over TCP.
cat >"$dir/data/pg_hba.conf" <<'EOF'
local     all all               trust
hostssl   all all 127.0.0.1/32  trust
hostssl   all all ::1/128       trust
hostnossl all all 0.0.0.0/0     reject
hostnossl all all ::/0          reject
EOF
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 30 \
  -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c ssl=on -c ssl_cert_file=$certs/server.pem -c ssl_key_file=$certs/server.key" start >&2 \
  || { tail -20 "$dir/log" >&2; exit 1; }
echo "$port" >"$dir/port"
echo "$dir"
