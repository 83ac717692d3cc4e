#!/usr/bin/env bash
# Stops the cluster scripts/pg/start.sh started in DIR (default target/pg).
# Idempotent; `--wipe` also removes its data.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
wipe=0
if [ "${1:-}" = "--wipe" ]; then wipe=1; shift; fi
dir="${1:-$root/target/pg}"
venv="${RAGSCOPE_PG_PYENV:-$root/.venv-pg}"
bin="$(echo "$venv"/lib/python3*/site-packages/pgserver/pginstall/bin)"
as_pg=()
if [ "$(id -u)" = 0 ]; then as_pg=(runuser -u ragscope-pg --); fi
if [ -d "$dir/data" ] && [ -x "$bin/pg_ctl" ]; then
  "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1 && "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2
fi
rm -f "$dir/port" "$dir/env"
if [ "$wipe" = 1 ]; then rm -rf "$dir"; fi
echo "pg/stop.sh: stopped" >&2
