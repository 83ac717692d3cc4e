#!/usr/bin/env bash
# Stops the cluster scripts/pg/start.sh started in DIR (default as in common.sh).
# Idempotent; `--wipe` also removes its data.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
wipe=0
if [ "${1:-}" = "--wipe" ]; then wipe=1; shift; fi
source "$root/scripts/pg/common.sh"
dir="${1:-$pg_default_dir}"
bin="$(echo "$pg_venv"/lib/python3*/site-packages/pgserver/pginstall/bin)"
if [ -d "$dir/data" ] && [ -x "$bin/pg_ctl" ]; then
  "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1 && "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2
fi
rm -f "$dir/port" "$dir/env"
if [ "$wipe" = 1 ]; then rm -rf "$dir"; fi
echo "pg/stop.sh: stopped" >&2
