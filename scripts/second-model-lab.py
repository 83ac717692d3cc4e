#!/usr/bin/env python3
"""Would a second, English-only embedder help? Re-fuses offline the lists of
two `ragscope eval --dump-lists` runs over the same set and judgements:

    A: the engine as configured (`--mode hybrid`, the e5 embedder)
    B: the dense path of another embedder (`--mode dense`, e.g.
       RAGSCOPE_EMBEDDER__KIND=bert RAGSCOPE_EMBEDDER__MODEL_DIR=models/all-MiniLM-L6-v2)

    scripts/second-model-lab.py NAME=A.jsonl,B.jsonl,qrels.tsv [more]

Three ways of adding B, each on a grid of λ (the lexical share, as the
engine's convex rule splits it) and μ (B's share of the dense weight):

- "path": B as a path of its own, its top 100 normalised as the dense path
  is (min-max at rank 50);
- "union": B scoring only the candidates some path of A returned (what a
  rescoring stage with stored vectors can do without a second index);
- "in dense": B's raw cosine mixed into the dense path's own candidates
  ((1 − μ)·A + μ·B), then fused as the dense path is.

μ = 0 is the engine (the first row checks that). Use development
judgements only (qrels/dev.tsv, SciFact train, XQuAD zh->zh and en->en)."""
import importlib.util
import os
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("fusion_lab", os.path.join(HERE, "fusion-lab.py"))
fl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fl)

DEPTH = 50


def load(spec):
    name, rest = spec.split("=", 1)
    a, b, qrels = rest.split(",")
    _, rows_a, judged = fl.load(f"{name}={a}:{qrels}")
    _, rows_b, _ = fl.load(f"{name}={b}:{qrels}")
    by_qid = {r["qid"]: r for r in rows_b}
    return name, [(r, by_qid[r["qid"]]) for r in rows_a if r["qid"] in by_qid], judged


def fuse(lists, extra, lam, mu):
    """The engine's convex rule (lexical paths over their best, dense min-max
    at rank 50, λ split) with `extra` as one more dense list of share μ."""
    running = [p for p in fl.LEXICAL if lists.get(p)]
    lex_total = sum(fl.WEIGHTS[p] for p in running)
    score = defaultdict(float)
    for p in running:
        w = lam * fl.WEIGHTS[p] / lex_total
        for d, n in fl.by_max(lists[p]).items():
            score[d] += w * n
    for hits, w in [(lists.get("dense", []), (1 - lam) * (1 - mu)), (extra, (1 - lam) * mu)]:
        if w > 0:
            for d, n in fl.minmax_at(hits, DEPTH).items():
                score[d] += w * n
    return fl.order(score, {})


def ways(a, b, mu):
    """(lists, extra list) for each way of adding B at share μ."""
    lists, other = a["lists"], b["lists"].get("dense", [])
    union = {d for hits in lists.values() for d, _ in hits}
    own = dict(other)
    floor = min(own.values()) if own else 0.0
    mixed = sorted(
        ((d, (1 - mu) * s + mu * own.get(d, floor)) for d, s in lists.get("dense", [])),
        key=lambda x: -x[1],
    )
    return {
        "path": (lists, other, mu),
        "union": (lists, [(d, s) for d, s in other if d in union], mu),
        "in dense": (dict(lists, dense=mixed), [], 0.0),
    }


def main():
    for spec in sys.argv[1:]:
        name, pairs, judged = load(spec)
        mean = lambda f: sum(fl.ndcg10(f(a, b), judged[a["qid"]]) for a, b in pairs) / len(pairs)
        print(f"{name}: engine {mean(lambda a, b: a['fused']):.4f}, "
              f"B's dense path alone {mean(lambda a, b: [d for d, _ in b['lists'].get('dense', [])]):.4f}")
        for way in ["path", "union", "in dense"]:
            for lam in ["applied", 0.2, 0.3, 0.4, 0.5, 0.6]:
                cells = []
                for mu in [0.0, 0.2, 0.3, 0.5, 0.7, 1.0]:
                    def ranked(a, b, lam=lam, mu=mu):
                        lists, extra, share = ways(a, b, mu)[way]
                        return fuse(lists, extra, a["applied_lambda"] if lam == "applied" else lam, share)
                    cells.append(f"μ {mu}: {mean(ranked):.4f}")
                print(f"  {way:8} λ {lam}: " + "  ".join(cells))


if __name__ == "__main__":
    main()
