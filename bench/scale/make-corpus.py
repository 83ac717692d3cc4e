#!/usr/bin/env python3
"""A deterministic BEIR-format corpus of N synthetic documents for the scale
check: each document is 4 to 12 sentences drawn with a fixed seed from
SciFact's corpus (English; one document in four from CMRC 2018's, Chinese),
read from the evaluation directory. The SciFact test queries and judgements
are kept (their judged documents are included as they are), so `ragscope
eval` has something to score. Standard library only.

usage: make-corpus.py EVAL_DIR OUT_DIR N
"""
import json
import os
import random
import re
import sys


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def sentences(text):
    parts = re.split(r"(?<=[.!?。！？])\s*", text)
    return [p.strip() for p in parts if len(p.strip()) >= 8]


def main():
    eval_dir, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sci = read_jsonl(os.path.join(eval_dir, "scifact", "corpus.jsonl"))
    cmrc = read_jsonl(os.path.join(eval_dir, "cmrc2018", "corpus.jsonl"))
    en = [s for d in sci for s in sentences(d.get("text", ""))]
    zh = [s for d in cmrc for s in sentences(d.get("text", ""))]
    rng = random.Random(20261201)
    os.makedirs(os.path.join(out, "qrels"), exist_ok=True)
    qrels_in = os.path.join(eval_dir, "scifact", "qrels", "test.tsv")
    judged = {}
    with open(qrels_in, encoding="utf-8") as f:
        rows = [l.rstrip("\n").split("\t") for l in f][1:]
    for q, d, s in rows:
        judged.setdefault(d, True)
    by_id = {d["_id"]: d for d in sci}
    written = 0
    with open(os.path.join(out, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for d in sorted(judged):
            if d in by_id and written < n:
                f.write(json.dumps(by_id[d], ensure_ascii=False) + "\n")
                written += 1
        i = 0
        while written < n:
            pool = zh if i % 4 == 3 else en
            k = rng.randint(4, 12)
            text = " ".join(rng.choice(pool) for _ in range(k))
            f.write(json.dumps({"_id": f"syn-{i}", "title": f"Document {i}", "text": text},
                               ensure_ascii=False) + "\n")
            written += 1
            i += 1
    queries = read_jsonl(os.path.join(eval_dir, "scifact", "queries.jsonl"))
    wanted = {q for q, _, _ in rows}
    with open(os.path.join(out, "queries.jsonl"), "w", encoding="utf-8") as f:
        for q in queries:
            if q["_id"] in wanted:
                f.write(json.dumps(q, ensure_ascii=False) + "\n")
    with open(os.path.join(out, "qrels", "test.tsv"), "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for q, d, s in rows:
            f.write(f"{q}\t{d}\t{s}\n")


if __name__ == "__main__":
    main()
