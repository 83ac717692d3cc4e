#!/usr/bin/env bash
# The scale issue's 100k check, step by step, with each step's time:
#   eval (load + index) → kb list → serve → first query → one FAQ write →
#   next query → the server's VmRSS → 64 more writes, after which the server
#   stores its index files again (what that save wrote, from its log line).
# usage: bench/scale/check-100k.sh [N] (default 100000); needs a release build
# (cargo build --release -p ragscope) and the evaluation data.
set -euo pipefail
cd "$(dirname "$0")/../.."
N="${1:-100000}"
EVAL="${RAGSCOPE_EVAL_DIR:-../shared/eval}"
BIN="${SCALE_BIN:-target/release/ragscope}"
WORK="$(mktemp -d)"
trap 'kill "${PID:-}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
python3 bench/scale/make-corpus.py "$EVAL" "$WORK/c" "$N"
D="$WORK/data"
ms() { date +%s%3N; }
t=$(ms)
/usr/bin/time -f "%M" -o "$WORK/eval.rss" "$BIN" --embedder none --data-dir "$D" eval \
  --corpus "$WORK/c/corpus.jsonl" --queries "$WORK/c/queries.jsonl" \
  --qrels "$WORK/c/qrels/test.tsv" --mode lexical --json > "$WORK/eval.json"
echo "eval (load + index + $(wc -l < "$WORK/c/queries.jsonl") queries): $(( $(ms) - t )) ms, peak RSS $(( $(cat "$WORK/eval.rss") / 1024 )) MB"
t=$(ms)
"$BIN" --embedder none --data-dir "$D" kb list > /dev/null
echo "kb list: $(( $(ms) - t )) ms"
PORT=$((20000 + RANDOM % 20000))
# Starts a server over $D logging to $1 (PID set) and waits for /healthz.
serve() {
  RAGSCOPE_SERVER__ADDR="127.0.0.1:$PORT" "$BIN" --embedder none --data-dir "$D" --log-level rag_engine=info serve --open > "$1" 2>&1 &
  PID=$!
  until curl -sf "http://127.0.0.1:$PORT/healthz" > /dev/null; do
    kill -0 "$PID" 2>/dev/null || { cat "$1"; exit 1; }
    sleep 0.05
  done
}
t=$(ms)
serve "$WORK/serve.log"
echo "serve: /healthz after $(( $(ms) - t )) ms"
q() {
  curl -s -o "$WORK/out.json" -w "%{http_code} %{time_total}" -X POST \
    -H 'content-type: application/json' \
    "http://127.0.0.1:$PORT/api/v1/kbs/eval-corpus/query/sync" -d "{\"query\": \"$1\"}"
}
echo "first query: $(q 'vitamin D deficiency and bone density') s (status, seconds)"
python3 -c "import json; ev=json.load(open('$WORK/out.json'))['events']; print('  hits after reranking:', sum(len(e['hits']) for e in ev if e['type'] == 'reranked'))" || true
echo "second query: $(q 'obesity taxation in India') s"
curl -s -o /dev/null -w "faq write: %{http_code} %{time_total} s\n" -X POST -H 'content-type: application/json' \
  "http://127.0.0.1:$PORT/api/v1/kbs/eval-corpus/faqs" -d '{"question": "How long do refunds take?", "answer": "Refunds take three days."}'
echo "query after the write: $(q 'how long do refunds take') s"
echo "next query: $(q 'vitamin D deficiency and bone density') s"
rss() { echo "$(awk '/VmRSS/ {print int($2/1024)}' /proc/$PID/status) MB (peak $(awk '/VmHWM/ {print int($2/1024)}' /proc/$PID/status) MB; of it mapped from files: $(awk '/RssFile/ {print int($2/1024)}' /proc/$PID/status) MB)"; }
echo "server VmRSS: $(rss)"
# Every query of the set once more: index pages read in place stay resident
# once touched (the kernel may drop them again under memory pressure).
python3 - "$PORT" "$WORK/c/queries.jsonl" <<'PY'
import json, sys, time, urllib.request
port, path = sys.argv[1], sys.argv[2]
times = []
for line in open(path):
    body = json.dumps({"query": json.loads(line)["text"]}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/kbs/eval-corpus/query/sync", body, {"content-type": "application/json"})
    t = time.perf_counter()
    urllib.request.urlopen(req).read()
    times.append((time.perf_counter() - t) * 1000)
times.sort()
print(f"{len(times)} more queries: p50 {times[len(times)//2]:.1f} ms, p99 {times[int(len(times)*0.99)]:.1f} ms")
PY
echo "server VmRSS after them: $(rss)"
# 64 more FAQ writes, each followed by a query (which brings the index up
# to date): the server then stores its index files again.
for i in $(seq 1 64); do
  curl -s -o /dev/null -X POST -H 'content-type: application/json' \
    "http://127.0.0.1:$PORT/api/v1/kbs/eval-corpus/faqs" \
    -d "{\"question\": \"Question $i about refunds?\", \"answer\": \"Answer $i.\"}"
  q "question $i about refunds" > /dev/null
done
for _ in $(seq 1 300); do
  grep -q 'stored the index files' "$WORK/serve.log" && break
  sleep 0.1
done
echo "index files stored again after 65 writes:"
grep 'stored the index files' "$WORK/serve.log" | sed -e 's/\x1b\[[0-9;]*m//g' -e 's/^.*stored the index files/ /' || echo "  (not yet)"
du -sh "$D/index" | awk '{print "index files: " $1}'
du -sh "$D" | awk '{print "data directory: " $1}'
# A server over the same data without its index files: it builds them from
# the store (streamed, in segments written as they are built) while
# queries get `index_building`; its peak RSS is what building takes.
kill "$PID"; wait "$PID" 2>/dev/null || true
rm -rf "$D/index"
t=$(ms)
serve "$WORK/serve2.log"
# Until the query is answered: while the build runs its events end with
# the error code index_building.
until [ "$(q 'vitamin D deficiency and bone density' | cut -d' ' -f1)" = 200 ] \
  && ! grep -q index_building "$WORK/out.json"; do sleep 0.5; done
echo "a server without index files: first answer after $(( $(ms) - t )) ms (built from the store)"
echo "its VmRSS: $(rss)"
grep 'built the lexical index in segments' "$WORK/serve2.log" | sed -e 's/\x1b\[[0-9;]*m//g' -e 's/^.*in segments/ /' || true
