#!/usr/bin/env python3
"""Compares per-query λ rules offline on `ragscope eval --mode hybrid --dump-lists`
output. The fusion below is the engine's weighted RRF (rag-fusion) with the
default weights; with the λ the engine applied (`applied`) it reproduces the
engine's nDCG@10 exactly, which is how it is checked before use.

    ragscope --embedder e5 eval --mode hybrid --corpus C --queries Q --qrels R --dump-lists dump.jsonl
    scripts/fusion-rules.py dump.jsonl R [more dump/qrels pairs]

Use it on development judgements only (see README, Quality)."""
import json
import math
import sys
from collections import defaultdict

ORDER = ["bm25", "substring", "fuzzy", "synonym", "fact", "dense"]
WEIGHTS = {"bm25": 1.0, "substring": 0.1, "fuzzy": 1.0, "synonym": 0.5, "fact": 1.0, "dense": 1.0}
K = 60.0


def load(dump, qrels_path):
    qrels = defaultdict(dict)
    for line in open(qrels_path):
        cols = line.rstrip("\n").split("\t")
        try:
            score = float(cols[2])
        except (IndexError, ValueError):
            continue
        if score > 0:
            qrels[cols[0]][cols[1]] = score
    return [json.loads(l) for l in open(dump)], qrels


def fuse(lists, lam, top_k=100):
    running = [p for p in ORDER if lists.get(p)]
    lex_total = sum(WEIGHTS[p] for p in running if p != "dense")

    def weight(p):
        if lam is None:
            return WEIGHTS[p]
        if p == "dense":
            return 1.0 - lam
        return lam * WEIGHTS[p] / lex_total if lex_total > 0 else 0.0

    score, best, first = {}, {}, {}
    for p in running:
        w = weight(p)
        for rank, (doc, _) in enumerate(lists[p], 1):
            if doc not in score:
                score[doc], best[doc], first[doc] = 0.0, rank, len(first)
            score[doc] += w / (K + rank)
            best[doc] = min(best[doc], rank)
    return sorted(score, key=lambda d: (-score[d], best[d], first[d]))[:top_k]


def ndcg10(ranked, rel):
    dcg = sum(rel.get(d, 0.0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(sorted(rel.values(), reverse=True)[:10]))
    return dcg / idcg if idcg else 0.0


def evaluate(rows, qrels, rule):
    scores = [ndcg10(fuse(r["lists"], rule(r)), qrels[r["qid"]]) for r in rows if qrels.get(r["qid"])]
    return sum(scores) / len(scores)


def margin(hits, over=None):
    """(s1 - s2) / s1, or (s1 - s2) / (s1 - s_over) with `over` the rank compared against."""
    if not hits or len(hits) < 2:
        return None
    s1, s2 = hits[0][1], hits[1][1]
    if over is None:
        return (s1 - s2) / s1 if s1 > 0 else 0.0
    sn = hits[min(over, len(hits)) - 1][1]
    return (s1 - s2) / (s1 - sn) if s1 > sn else 0.0


def same_language(f):
    """Applies `f` to questions in the knowledge base's language; across languages the 0.2 suggestion stays."""
    def rule(r):
        lam = r["suggested_lambda"] if r["lists"].get("dense") else None
        if lam is None or lam == 0.2:
            return lam
        return f(r, lam)
    return rule


def coverage_of_bm25_top(r):
    bm, sub = r["lists"].get("bm25"), dict((d, s) for d, s in r["lists"].get("substring") or [])
    return sub.get(bm[0][0], 0.0) if bm else 0.0


def rules():
    yield "applied (what the engine did)", lambda r: r["applied_lambda"]
    yield "suggested before recall", same_language(lambda r, l: l)
    for tau in [0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8]:
        for hi in [0.7, 0.8, 0.9, 1.0]:
            yield f"A: BM25 margin >= {tau} -> {hi}", same_language(
                lambda r, l, tau=tau, hi=hi: max(l, hi) if (m := margin(r["lists"].get("bm25"))) is not None and m >= tau else l)
    for delta in [0.1, 0.2, 0.3, 0.4, 0.5]:
        for hi, lo in [(0.7, 0.3), (0.8, 0.2), (0.7, 0.5), (0.8, 0.5), (0.9, 0.1)]:
            def f(r, l, delta=delta, hi=hi, lo=lo):
                ml, md = margin(r["lists"].get("bm25"), 10), margin(r["lists"].get("dense"), 10)
                if ml is None or md is None:
                    return l
                return max(l, hi) if ml - md >= delta else min(l, lo) if md - ml >= delta else l
            yield f"B: top-10 margins differ by {delta} -> {hi}/{lo}", same_language(f)
    for alpha in [0.1, 0.2, 0.3, 0.4, 0.5]:
        def f(r, l, alpha=alpha):
            ml, md = margin(r["lists"].get("bm25"), 10), margin(r["lists"].get("dense"), 10)
            return l if ml is None or md is None else min(0.9, max(0.1, l + alpha * (ml - md)))
        yield f"C: suggested + {alpha} x (margin difference)", same_language(f)
    for c in [0.6, 0.8, 0.99]:
        for hi in [0.6, 0.7, 0.8, 0.9]:
            yield f"E: key-term coverage of BM25's top >= {c} -> {hi}", same_language(
                lambda r, l, c=c, hi=hi: max(l, hi) if coverage_of_bm25_top(r) >= c else l)
    def agree(r):
        bm = r["lists"].get("bm25")
        others = [p for p in ("substring", "fuzzy") if r["lists"].get(p)]
        return bool(bm) and bool(others) and all(r["lists"][p][0][0] == bm[0][0] for p in others)
    for hi in [0.6, 0.7, 0.8, 0.9]:
        yield f"F: lexical paths agree on the top -> {hi}", same_language(lambda r, l, hi=hi: max(l, hi) if agree(r) else l)
    for tl, td, lo in [(0.1, 0.3, 0.3), (0.1, 0.5, 0.3), (0.2, 0.4, 0.3), (0.1, 0.4, 0.4), (0.05, 0.4, 0.3)]:
        def f(r, l, tl=tl, td=td, lo=lo):
            m, md = margin(r["lists"].get("bm25")), margin(r["lists"].get("dense"), 10)
            if m is not None and m >= 0.4:
                return max(l, 0.9)
            if (m is None or m < tl) and md is not None and md >= td:
                return min(l, lo)
            return l
        yield f"G: A(0.4, 0.9) + BM25 margin < {tl} and dense >= {td} -> {lo}", same_language(f)


def main():
    args = sys.argv[1:]
    if not args or len(args) % 2:
        sys.exit(__doc__)
    sets = [(a, load(a, b)) for a, b in zip(args[::2], args[1::2])]
    for name, rule in rules():
        print(f"{name:58s}", "  ".join(f"{evaluate(rows, qrels, rule):.4f}" for _, (rows, qrels) in sets))


if __name__ == "__main__":
    main()
