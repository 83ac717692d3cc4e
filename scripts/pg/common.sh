# Shared by start.sh and stop.sh: where the environment and the cluster live,
# and as whom the server runs.
#
# PostgreSQL refuses to run as root, so as root it runs as the system user
# ragscope-pg (created without a home or a login shell when missing). That
# user must reach the binaries and the data directory: when the checkout is
# not reachable for it (a checkout under /root, say), both move to
# /var/tmp/ragscope-pg-<hash of the checkout path>.
pg_venv="${RAGSCOPE_PG_PYENV:-$root/.venv-pg}"
pg_default_dir="$root/target/pg"
as_pg=()
if [ "$(id -u)" = 0 ]; then
  id ragscope-pg >/dev/null 2>&1 || useradd --system -M -s /usr/sbin/nologin ragscope-pg
  as_pg=(runuser -u ragscope-pg --)
  if ! runuser -u ragscope-pg -- test -x "$root"; then
    pg_shared="/var/tmp/ragscope-pg-$(printf '%s' "$root" | sha256sum | cut -c1-12)"
    mkdir -p "$pg_shared"
    chmod 755 "$pg_shared"
    pg_venv="${RAGSCOPE_PG_PYENV:-$pg_shared/venv}"
    pg_default_dir="$pg_shared/cluster"
  fi
fi
