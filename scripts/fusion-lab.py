#!/usr/bin/env python3
"""Tries fusion functions offline on `ragscope eval --mode hybrid --dump-lists`
output: the engine's weighted RRF with its λ (reproduced exactly; the first
row checks that), and score-aware convex combinations of normalised path
scores (Bruch, Gai and Ingber, 2023) with per-query confidence rules.

    ragscope --embedder e5 eval --mode hybrid --corpus C --queries Q --qrels R --dump-lists dump.jsonl
    scripts/fusion-lab.py NAME=dump.jsonl:qrels.tsv [more]

Prints nDCG@10 per set and the mean, one row per rule. Use development
judgements only (qrels/dev.tsv, SciFact train, XQuAD zh->zh and en->en)."""
import json
import math
import sys
from collections import defaultdict

LEXICAL = ["bm25", "substring", "fuzzy", "synonym", "fact"]
WEIGHTS = {"bm25": 1.0, "substring": 0.1, "fuzzy": 1.0, "synonym": 0.5, "fact": 1.0, "dense": 1.0}
K = 60.0


def load(spec):
    name, rest = spec.split("=", 1)
    dump, qrels_path = rest.rsplit(":", 1)
    qrels = defaultdict(dict)
    for line in open(qrels_path):
        cols = line.rstrip("\n").split("\t")
        try:
            score = float(cols[2])
        except (IndexError, ValueError):
            continue
        if score > 0:
            qrels[cols[0]][cols[1]] = score
    rows = [json.loads(l) for l in open(dump)]
    rows = [r for r in rows if qrels.get(r["qid"])]
    return name, rows, qrels


def ndcg10(ranked, rel):
    dcg = sum(rel.get(d, 0.0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(sorted(rel.values(), reverse=True)[:10]))
    return dcg / idcg if idcg else 0.0


def order(score, best):
    return sorted(score, key=lambda d: (-score[d], best.get(d, 10**9), d))


def rrf(lists, lam):
    """The engine's weighted RRF with λ (None: the raw weights)."""
    running = [p for p in LEXICAL + ["dense"] if lists.get(p)]
    lex_total = sum(WEIGHTS[p] for p in running if p != "dense")

    def weight(p):
        if lam is None:
            return WEIGHTS[p]
        if p == "dense":
            return 1.0 - lam
        return lam * WEIGHTS[p] / lex_total if lex_total > 0 else 0.0

    score, best = {}, {}
    first = {}
    for p in running:
        w = weight(p)
        for rank, (doc, _) in enumerate(lists[p], 1):
            if doc not in score:
                score[doc], best[doc], first[doc] = 0.0, rank, len(first)
            score[doc] += w / (K + rank)
            best[doc] = min(best[doc], rank)
    return sorted(score, key=lambda d: (-score[d], best[d], first[d]))


def lexical_rrf_scores(lists):
    """The lexical paths' own RRF, normalised to [0, 1] by its maximum possible value."""
    running = [p for p in LEXICAL if lists.get(p)]
    total = sum(WEIGHTS[p] for p in running)
    out = defaultdict(float)
    for p in running:
        for rank, (doc, _) in enumerate(lists[p], 1):
            out[doc] += WEIGHTS[p] / (K + rank)
    top = total / (K + 1) if total else 1.0
    return {d: s / top for d, s in out.items()}


def minmax(hits, floor=None):
    """Min-max normalisation over the returned list; `floor` replaces the list's minimum."""
    if not hits:
        return {}
    hi = hits[0][1]
    lo = hits[-1][1] if floor is None else floor
    span = hi - lo
    return {d: ((s - lo) / span if span > 0 else 1.0) for d, s in hits}


def minmax_at(hits, depth):
    """Min-max between the top score and the score at rank `depth` (the list's
    last when shorter), clipped at 0: the same for any list depth >= `depth`."""
    if not hits:
        return {}
    hi = hits[0][1]
    lo = hits[min(depth, len(hits)) - 1][1]
    span = hi - lo
    return {d: (max(0.0, (s - lo) / span) if span > 0 else 1.0) for d, s in hits}


def by_max(hits):
    hi = hits[0][1] if hits else 0.0
    return {d: (s / hi if hi > 0 else 0.0) for d, s in hits}


def convex(lex, dense, alpha):
    """α·lexical + (1-α)·dense over the union; a passage missing from a list scores 0 there."""
    docs = set(lex) | set(dense)
    score = {d: alpha * lex.get(d, 0.0) + (1 - alpha) * dense.get(d, 0.0) for d in docs}
    return order(score, {})


def margin(hits, over=None):
    if not hits or len(hits) < 2:
        return None
    s1, s2 = hits[0][1], hits[1][1]
    if over is None:
        return (s1 - s2) / s1 if s1 > 0 else 0.0
    sn = hits[min(over, len(hits)) - 1][1]
    return (s1 - s2) / (s1 - sn) if s1 > sn else 0.0


def across(r):
    return r["suggested_lambda"] == 0.2


def rules():
    yield "engine (applied λ, RRF)", lambda r: rrf(r["lists"], r["applied_lambda"])
    yield "lexical only (RRF of lexical paths)", lambda r: rrf({p: h for p, h in r["lists"].items() if p != "dense"}, None)
    yield "dense only", lambda r: [d for d, _ in r["lists"].get("dense", [])]
    yield "RRF, suggested λ before recall", lambda r: rrf(r["lists"], r["suggested_lambda"])
    for lam in [0.3, 0.4, 0.5]:
        yield f"RRF fixed λ {lam}", lambda r, lam=lam: rrf(r["lists"], lam)
    lex_norms = {
        "lexRRF": lambda r: lexical_rrf_scores(r["lists"]),
        "bm25/max": lambda r: by_max(r["lists"].get("bm25", [])),
        "bm25 minmax": lambda r: minmax(r["lists"].get("bm25", [])),
        "bm25 mm@20": lambda r: minmax_at(r["lists"].get("bm25", []), 20),
    }
    dense_norms = {
        "cos minmax": lambda r: minmax(r["lists"].get("dense", [])),
        "cos>0.7": lambda r: minmax(r["lists"].get("dense", []), floor=0.7),
        "cos mm@20": lambda r: minmax_at(r["lists"].get("dense", []), 20),
        "cos mm@10": lambda r: minmax_at(r["lists"].get("dense", []), 10),
    }
    for ln, lf in lex_norms.items():
        for dn, df in dense_norms.items():
            for alpha in [0.2, 0.3, 0.4, 0.5, 0.6]:
                def f(r, lf=lf, df=df, alpha=alpha):
                    a = 0.05 if across(r) else alpha
                    return convex(lf(r), df(r), a)
                yield f"CC {ln} + {dn}, α {alpha} (0.05 across)", f


def convex_all(lists, lam, depth=20):
    """Every path min-max@depth, weighted as the engine weights RRF (λ split)."""
    running = [p for p in LEXICAL + ["dense"] if lists.get(p)]
    lex_total = sum(WEIGHTS[p] for p in running if p != "dense")
    score = defaultdict(float)
    for p in running:
        w = (1.0 - lam) if p == "dense" else lam * WEIGHTS[p] / lex_total if lex_total else 0.0
        for d, n in minmax_at(lists[p], depth).items():
            score[d] += w * n
    return order(score, {})


def convex_mixed(lists, lam, dense_norm, lexical=LEXICAL):
    """Lexical paths normalised by their best score (their floor is 0), the
    dense path by `dense_norm`; weighted as the engine weights RRF (λ split)."""
    running = [p for p in lexical + ["dense"] if lists.get(p)]
    lex_total = sum(WEIGHTS[p] for p in running if p != "dense")
    score = defaultdict(float)
    for p in running:
        w = (1.0 - lam) if p == "dense" else lam * WEIGHTS[p] / lex_total if lex_total else 0.0
        norm = dense_norm(lists[p]) if p == "dense" else by_max(lists[p])
        for d, n in norm.items():
            score[d] += w * n
    return order(score, {})


def more_rules():
    for dn, df in [("minmax", minmax), ("mm@20", lambda h: minmax_at(h, 20)), ("mm@50", lambda h: minmax_at(h, 50))]:
        for lex_name, lex in [("all lexical", LEXICAL), ("bm25+fuzzy", ["bm25", "fuzzy"]), ("bm25+fuzzy+syn+fact", ["bm25", "fuzzy", "synonym", "fact"])]:
            for lam in [0.15, 0.2, 0.25, 0.3, 0.35, 0.4]:
                for ac in [0.0, 0.05, 0.1, 0.2]:
                    yield f"MIX {lex_name} /max + dense {dn}, λ {lam} ({ac} across)", lambda r, lam=lam, df=df, lex=lex, ac=ac: convex_mixed(r["lists"], ac if across(r) else lam, df, lex)
    for depth in [10, 20]:
        for lam in [0.3, 0.4, 0.5, 0.6]:
            yield f"CCall mm@{depth} λ {lam} (0.05 across)", lambda r, lam=lam, depth=depth: convex_all(r["lists"], 0.05 if across(r) else lam, depth)
        yield f"CCall mm@{depth} suggested λ", lambda r, depth=depth: convex_all(r["lists"], r["suggested_lambda"], depth)
        yield f"CCall mm@{depth} applied λ", lambda r, depth=depth: convex_all(r["lists"], r["applied_lambda"], depth)


def main():
    sets = [load(a) for a in sys.argv[1:] if a != '--all']
    if not sets:
        sys.exit(__doc__)
    print(f"{'rule':58s}", "  ".join(f"{n:>8s}" for n, _, _ in sets), "    mean")
    for name, rule in (list(rules()) if '--all' in sys.argv else []) + list(more_rules()):
        vals = [sum(ndcg10(rule(r), q[r["qid"]]) for r in rows) / len(rows) for _, rows, q in sets]
        print(f"{name:58s}", "  ".join(f"{v:8.4f}" for v in vals), f"  {sum(vals) / len(vals):.4f}")


if __name__ == "__main__":
    main()
