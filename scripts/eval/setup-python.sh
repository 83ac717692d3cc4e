#!/usr/bin/env bash
# Creates .venv-eval (or $EVAL_PYENV) with pytrec_eval, pinned, for the test
# that checks `ragscope eval`'s metrics against it. Idempotent. Prints the
# environment's python on its last line. Nothing here is needed at run time.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="${EVAL_PYENV:-$root/.venv-eval}"
python="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$root/scripts/eval/requirements.txt" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$root/scripts/eval/requirements.txt"
  echo "$want" > "$stamp"
fi
echo "$venv/bin/python"
