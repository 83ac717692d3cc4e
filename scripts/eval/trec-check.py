#!/usr/bin/env python3
"""Scores a TREC run file with pytrec_eval and prints the four figures
`ragscope eval --json` reports, as one JSON object:

    trec-check.py QRELS.tsv RUN.txt

nDCG@10 and Recall@10/@100 come from pytrec_eval's ndcg_cut, recall measures;
MRR@10 is its recip_rank over the run cut at rank 10. Queries of the qrels
without any line in the run count as zero, as `ragscope eval` counts them."""
import json
import sys

import pytrec_eval


def main():
    qrels_path, run_path = sys.argv[1], sys.argv[2]
    qrels = {}
    for line in open(qrels_path):
        cols = line.rstrip("\n").split("\t")
        try:
            score = int(float(cols[2]))
        except (IndexError, ValueError):
            continue
        qrels.setdefault(cols[0], {})[cols[1]] = score
    run, top10 = {}, {}
    for line in open(run_path):
        qid, _, doc, rank, score, _ = line.split()
        run.setdefault(qid, {})[doc] = float(score)
        if int(rank) <= 10:
            top10.setdefault(qid, {})[doc] = float(score)
    judged = [q for q, rel in qrels.items() if any(v > 0 for v in rel.values())]
    full = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.10", "recall.100"}).evaluate(run)
    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
    n = len(judged)
    out = {
        "queries": n,
        "ndcg@10": sum(full.get(q, {}).get("ndcg_cut_10", 0.0) for q in judged) / n,
        "recall@10": sum(full.get(q, {}).get("recall_10", 0.0) for q in judged) / n,
        "recall@100": sum(full.get(q, {}).get("recall_100", 0.0) for q in judged) / n,
        "mrr@10": sum(rr.get(q, {}).get("recip_rank", 0.0) for q in judged) / n,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
