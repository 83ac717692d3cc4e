#!/usr/bin/env python3
"""LanceDB over the data `ragscope bench-scale --export DIR` wrote: the same
passages, queries and synthetic 384-d vectors, so the figures sit beside
ragscope's. Prints one JSON object.

    peers.py DIR

What it measures (release wheels pinned in bench/scale/requirements.txt):
table write, full-text index (LanceDB's own, default tokenizer), vector
index (IVF_HNSW_SQ, cosine, defaults) build times and size on disk; per
query, p50/p99 of the vector search (index, and exact with the index
bypassed), the full-text search, and the hybrid search (full text + vector,
LanceDB's default RRF reranker), each with the index and exact; recall@10
of the vector search against an exact cosine scan computed here with numpy;
the process's resident memory after the build and at its peak. The LanceDB
part runs in a child process, so its peak memory is LanceDB's and not that
of the exact scan.
"""
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

DIMS = 384
K = 10


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def vectors(path):
    return np.memmap(path, dtype="<f4", mode="r").reshape(-1, DIMS)


def summary(ms):
    s = sorted(ms)
    at = lambda q: s[min(len(s) - 1, int(q * len(s)))]
    return {"n": len(s), "p50_ms": round(at(0.5), 2), "p99_ms": round(at(0.99), 2)}


def rss_mb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) // 1024
    return 0


def exact_truth(d):
    """Ids of each query's exact cosine top 10."""
    ids = [p["id"] for p in read_jsonl(os.path.join(d, "passages.jsonl"))]
    p = np.asarray(vectors(os.path.join(d, "passage_vectors.f32")))
    p = p / np.maximum(np.linalg.norm(p, axis=1, keepdims=True), 1e-30)
    q = np.asarray(vectors(os.path.join(d, "query_vectors.f32")))
    q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-30)
    top = np.argsort(-(q @ p.T), axis=1)[:, :K]
    return [[ids[i] for i in row] for row in top]


def timed(queries, run):
    run(queries[0])  # warm the caches once
    out = []
    for q in queries:
        t = time.perf_counter()
        run(q)
        out.append((time.perf_counter() - t) * 1000.0)
    return out


def lance(d, truth_path):
    import lancedb
    import pyarrow as pa

    passages = read_jsonl(os.path.join(d, "passages.jsonl"))
    pv = vectors(os.path.join(d, "passage_vectors.f32"))
    queries = [q["text"] for q in read_jsonl(os.path.join(d, "queries.jsonl"))]
    qv = np.asarray(vectors(os.path.join(d, "query_vectors.f32")))
    truth = json.load(open(truth_path))
    work = tempfile.mkdtemp(prefix="lance-")
    try:
        db = lancedb.connect(work)
        schema = pa.schema(
            [
                pa.field("id", pa.string()),
                pa.field("text", pa.string()),
                pa.field("vector", pa.list_(pa.float32(), DIMS)),
            ]
        )
        out = {"engine": "lancedb " + lancedb.__version__, "passages": len(passages)}
        t = time.perf_counter()
        table = db.create_table("passages", schema=schema)
        for i in range(0, len(passages), 10_000):
            rows = passages[i : i + 10_000]
            flat = pa.array(np.ascontiguousarray(pv[i : i + len(rows)]).reshape(-1))
            table.add(
                pa.table(
                    {
                        "id": [r["id"] for r in rows],
                        "text": [r["text"] for r in rows],
                        "vector": pa.FixedSizeListArray.from_arrays(flat, DIMS),
                    },
                    schema=schema,
                )
            )
        out["write_s"] = round(time.perf_counter() - t, 2)
        t = time.perf_counter()
        table.create_fts_index("text")
        out["fts_index_s"] = round(time.perf_counter() - t, 2)
        t = time.perf_counter()
        table.create_index(metric="cosine", vector_column_name="vector", index_type="IVF_HNSW_SQ")
        out["vector_index_s"] = round(time.perf_counter() - t, 2)
        out["size_mb"] = round(
            sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(work) for f in fs) / 1e6, 1
        )
        out["rss_after_build_mb"] = rss_mb("VmRSS:")
        pairs = list(zip(queries, qv))

        def vec(exact):
            def run(pair):
                s = table.search(pair[1], vector_column_name="vector").distance_type("cosine").limit(K)
                if exact:
                    s = s.bypass_vector_index()
                return s.select(["id"]).to_arrow()["id"].to_pylist()

            return run

        def hybrid(exact):
            def run(pair):
                s = table.search(query_type="hybrid", vector_column_name="vector", fts_columns="text")
                s = s.vector(pair[1]).text(pair[0]).distance_type("cosine").limit(K)
                if exact:
                    s = s.bypass_vector_index()
                return s.select(["id"]).to_arrow()

            return run

        def fts(pair):
            return table.search(pair[0], query_type="fts", fts_columns="text").limit(K).select(["id"]).to_arrow()

        found = sum(len(set(vec(False)(p)) & set(t)) for p, t in zip(pairs, truth))
        out["vector_recall_at_10_vs_exact"] = round(found / (K * len(pairs)), 4)
        out["vector_query"] = summary(timed(pairs, vec(False)))
        out["vector_query_exact"] = summary(timed(pairs, vec(True)))
        out["fts_query"] = summary(timed(pairs, fts))
        out["hybrid_query"] = summary(timed(pairs, hybrid(False)))
        out["hybrid_query_exact"] = summary(timed(pairs, hybrid(True)))
        out["rss_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--lance":
        print(json.dumps(lance(sys.argv[2], sys.argv[3])))
        return
    d = sys.argv[1]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(exact_truth(d), f)
        truth = f.name
    try:
        child = subprocess.run(
            [sys.executable, __file__, "--lance", d, truth], check=True, capture_output=True, text=True
        )
        print(child.stdout.strip().splitlines()[-1])
    finally:
        os.unlink(truth)


if __name__ == "__main__":
    main()
