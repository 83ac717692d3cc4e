#!/usr/bin/env bash
# Creates the Python virtual environment used by the bm25s benchmark and
# installs the pinned requirements into it.
#
# The environment lives at ${RAGSCOPE_PYENV:-.venv-bench}; a relative path is
# taken relative to the repository root, not to the current directory.
# Running the script again is safe: an existing environment is reused, and pip
# leaves already-satisfied pins alone.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "${script_dir}/../.." && pwd)"

env_path="${RAGSCOPE_PYENV:-.venv-bench}"
case "${env_path}" in
  /*) ;;
  *) env_path="${repo_root}/${env_path}" ;;
esac

# Prefer CPython 3.11, which the pins were chosen for, but fall back to any
# python3 so that the script still works where 3.11 has another name.
python_bin="${PYTHON:-}"
if [[ -z "${python_bin}" ]]; then
  if command -v python3.11 >/dev/null 2>&1; then
    python_bin="python3.11"
  else
    python_bin="python3"
  fi
fi

if [[ ! -x "${env_path}/bin/python" ]]; then
  echo "setup.sh: creating virtual environment at ${env_path}" >&2
  "${python_bin}" -m venv "${env_path}"
fi

"${env_path}/bin/python" -m pip install --quiet --disable-pip-version-check \
  -r "${script_dir}/requirements.txt"

echo "setup.sh: ready: ${env_path}/bin/python" >&2
