#!/usr/bin/env bash
# Property-based check of the HTTP API with schemathesis (PyPI, pinned in
# scripts/api/requirements.txt): starts `ragscope serve` on a loopback port over
# a fresh data directory with the demo knowledge base, lets schemathesis
# generate a bounded number of requests per operation from /api/openapi.json,
# and fails on any 5xx or any response that violates the documented schema.
# The server stops when the check ends.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bin="${API_CHECK_BIN:-${CARGO_TARGET_DIR:-$root/target}/debug/ragscope}"
venv="${API_CHECK_PYENV:-$root/.venv-api}"
python="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
stamp="$venv/.requirements.sha256"
want="$(sha256sum scripts/api/requirements.txt | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r scripts/api/requirements.txt
  echo "$want" > "$stamp"
fi

work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
export RAGSCOPE_DATA_DIR="$work/data" RAGSCOPE_EMBEDDER__KIND=none RAGSCOPE_LOG__LEVEL=warn
"$bin" kb create demo >/dev/null
"$bin" ingest --kb demo demo/faq.jsonl demo/docs >/dev/null
"$bin" synonyms --kb demo demo/synonyms.tsv >/dev/null 2>&1 || true
"$bin" serve --addr 127.0.0.1:0 >"$work/server.out" 2>"$work/server.err" &
server_pid=$!
for _ in $(seq 1 100); do
  grep -q "listening on" "$work/server.out" 2>/dev/null && break
  sleep 0.1
done
url="$(grep -o 'http://127.0.0.1:[0-9]*' "$work/server.out" | head -1)"
key="$(grep -o 'rsk_[0-9a-f]*' "$work/server.out" | head -1)"
if [ -z "$url" ] || [ -z "$key" ]; then
  echo "api-check: the server did not start" >&2
  cat "$work/server.out" "$work/server.err" >&2
  exit 1
fi
cd "$work"
status=0
"$venv/bin/st" --config-file "$root/scripts/api/schemathesis.toml" run "$url/api/openapi.json" --url "$url/api/v1" \
  -H "Authorization: Bearer $key" \
  --checks not_a_server_error,response_schema_conformance \
  --phases examples,coverage,fuzzing --max-examples "${API_CHECK_EXAMPLES:-20}" \
  --seed 1 --workers 1 >"$work/st.txt" 2>&1 || status=$?
tail -25 "$work/st.txt"
if ! kill -0 "$server_pid" 2>/dev/null; then
  echo "api-check: the server died during the check" >&2
  cat "$work/server.err" >&2
  exit 1
fi
exit "$status"
