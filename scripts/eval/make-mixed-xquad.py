#!/usr/bin/env python3
"""Build a mixed-language development set from XQuAD's two languages.

One knowledge base holds both the English and the Chinese paragraphs (ids
prefixed ``en-`` and ``zh-``); every English and every Chinese question
(``en-``/``zh-`` too) is judged against both versions of its paragraph: the
one in its own language at grade 2, the other at grade 1 (the same answer,
in the other language). XQuAD en→en and zh→zh are development sets here, so
this set is one as well; it measures a knowledge base where the two
languages sit side by side, as the demo's do.

Usage: make-mixed-xquad.py OUT_DIR  (reads $RAGSCOPE_EVAL_DIR or ../shared/eval)
Writes OUT_DIR/corpus.jsonl, queries.jsonl and qrels.tsv; the texts stay
outside the repository.
"""

import json
import os
import sys
from pathlib import Path


def prefixed(src: Path, kind: str, dest: Path) -> None:
    """Both languages' rows of corpus or queries, ids prefixed by language."""
    with open(dest, "w", encoding="utf-8") as out:
        for lang in ("en", "zh"):
            for line in open(src / f"{kind}.{lang}.jsonl", encoding="utf-8"):
                row = json.loads(line)
                row["_id"] = f"{lang}-{row['_id']}"
                out.write(json.dumps(row, ensure_ascii=False) + "\n")


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = Path(__file__).resolve().parents[2]
    eval_dir = Path(os.environ.get("RAGSCOPE_EVAL_DIR", root.parent / "shared" / "eval"))
    src = eval_dir / "xquad"
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for kind in ("corpus", "queries"):
        prefixed(src, kind, out / f"{kind}.jsonl")
    with open(out / "qrels.tsv", "w", encoding="utf-8") as qrels:
        qrels.write("query-id\tcorpus-id\tscore\n")
        lines = open(src / "qrels" / "test.tsv", encoding="utf-8").read().splitlines()[1:]
        for line in lines:
            qid, pid, _ = line.split("\t")
            for lang, other in (("en", "zh"), ("zh", "en")):
                qrels.write(f"{lang}-{qid}\t{lang}-{pid}\t2\n")
                qrels.write(f"{lang}-{qid}\t{other}-{pid}\t1\n")


if __name__ == "__main__":
    main()
