#!/usr/bin/env bash
# A server over the PostgreSQL store: its memory against the knowledge
# base's size (issue 19, item 6). Loads N synthetic documents (the scale
# benchmark's corpus) into PostgreSQL with `ragscope eval` (lexical), then
# starts `ragscope serve` over the database, asks every query of the corpus
# once and reports the server's VmRSS and peak, and the query latencies.
# usage: ADMIN_URL=postgres://postgres@127.0.0.1:PORT/postgres \
#          bench/scale/pg-server-memory.sh N
# Needs a release build (or SCALE_BIN), the evaluation data, and a
# PostgreSQL with pgvector (scripts/pg/start.sh DIR prints an admin URL);
# the database is migrated first. The knowledge base `eval-corpus` of the
# default tenant is replaced when it holds another number of documents.
# SERVE_ONLY=1 skips the load (and eval's queries): the server part alone,
# over the knowledge base an earlier run loaded.
set -euo pipefail
cd "$(dirname "$0")/../.."
N="${1:-10000}"
EVAL="${RAGSCOPE_EVAL_DIR:-../shared/eval}"
BIN="${SCALE_BIN:-target/release/ragscope}"
ADMIN="${ADMIN_URL:?set ADMIN_URL to an administrator connection string}"
WORK="$(mktemp -d)"
trap 'kill "${PID:-}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
python3 bench/scale/make-corpus.py "$EVAL" "$WORK/c" "$N"
echo "app-secret" > "$WORK/pw"
"$BIN" --data-dir "$WORK/unused" migrate --admin-url "$ADMIN" --app-password-file "$WORK/pw" > /dev/null
hostpart="${ADMIN#*@}"
export RAGSCOPE_STORE="postgres://ragscope_app:app-secret@$hostpart"
ms() { date +%s%3N; }
if [ -z "${SERVE_ONLY:-}" ]; then
  t=$(ms)
  "$BIN" --embedder none --data-dir "$WORK/unused" eval \
    --corpus "$WORK/c/corpus.jsonl" --queries "$WORK/c/queries.jsonl" \
    --qrels "$WORK/c/qrels/test.tsv" --mode lexical --json > "$WORK/eval.json"
  echo "$N documents into PostgreSQL (load + $(wc -l < "$WORK/c/queries.jsonl") queries): $(( $(ms) - t )) ms"
fi
PORT=$((20000 + RANDOM % 20000))
RAGSCOPE_SERVER__ADDR="127.0.0.1:$PORT" "$BIN" --embedder none --data-dir "$WORK/data" serve --open > "$WORK/serve.log" 2>&1 &
PID=$!
until curl -sf "http://127.0.0.1:$PORT/healthz" > /dev/null; do
  kill -0 "$PID" 2>/dev/null || { cat "$WORK/serve.log"; exit 1; }
  sleep 0.05
done
rss() { echo "VmRSS $(awk '/VmRSS/ {print int($2/1024)}' /proc/$PID/status) MB, peak $(awk '/VmHWM/ {print int($2/1024)}' /proc/$PID/status) MB"; }
echo "server started: $(rss)"
python3 - "$PORT" "$WORK/c/queries.jsonl" <<'PY'
import json, sys, time, urllib.request
port, path = sys.argv[1], sys.argv[2]
def ask(text):
    body = json.dumps({"query": text}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/kbs/eval-corpus/query/sync", body, {"content-type": "application/json"})
    return urllib.request.urlopen(req).read().decode()
texts = [json.loads(line)["text"] for line in open(path)]
# The first answer: while a server builds its index, queries end with
# `index_building`.
t = time.perf_counter()
while "index_building" in ask(texts[0]):
    time.sleep(0.2)
first = (time.perf_counter() - t) * 1000
times = []
paths = {}
for text in texts[1:]:
    t = time.perf_counter()
    out = json.loads(ask(text))
    times.append((time.perf_counter() - t) * 1000)
    assert any(e["type"] == "context_assembled" and e["sources"] for e in out["events"]), "no context"
    for e in out["events"]:
        if e["type"] == "recall":
            paths.setdefault(e["list"]["path"], []).append(e["elapsed_ms"])
def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p))]
print(f"first answer after {first:.0f} ms; {len(times)} more queries: p50 {pct(times, 0.5):.1f} ms, p99 {pct(times, 0.99):.1f} ms")
print("each path's own time (its recall event), p50 / p99 ms: " + ", ".join(
    f"{p} {pct(v, 0.5):.1f} / {pct(v, 0.99):.1f}" for p, v in sorted(paths.items())))
PY
echo "server after the queries: $(rss)"
