#!/usr/bin/env bash
# Creates .venv-clients (or the directory given as $PROTOCOL_CLIENTS_VENV)
# with the pinned protocol clients of requirements.txt: the official MCP
# Python SDK and the openai package, which crates/ragscope/tests/clients.rs
# drives against `ragscope mcp` and `ragscope serve`. Idempotent: pip runs
# only when requirements.txt changed. Prints the environment's directory on
# standard output (scripts/test exports it as PROTOCOL_CLIENTS_VENV).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="${PROTOCOL_CLIENTS_VENV:-$root/.venv-clients}"
python="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv" >&2
fi
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$root/scripts/clients/requirements.txt" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps \
    -r "$root/scripts/clients/requirements.txt" >&2
  "$venv/bin/pip" check --disable-pip-version-check >&2
  echo "$want" > "$stamp"
fi
echo "clients/setup-python.sh: ready: $venv" >&2
echo "$venv"
