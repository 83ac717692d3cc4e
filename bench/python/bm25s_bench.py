#!/usr/bin/env python3
"""Benchmark the bm25s library on a BEIR-format dataset.

The script indexes a corpus with bm25s, runs every query of one qrels split
one at a time, and reports indexing throughput, per-query latency and
retrieval quality (nDCG@10, Recall@10, Recall@100, MRR@10) as one JSON object.

The dataset directory must hold the BEIR layout:

    corpus.jsonl        one {"_id", "title", "text"} object per line
    queries.jsonl       one {"_id", "text"} object per line
    qrels/<split>.tsv   header "query-id<TAB>corpus-id<TAB>score", then rows

Example:

    python bm25s_bench.py --dataset /work/shared/eval/scifact --split test --json
    python bm25s_bench.py --dataset /work/shared/eval/cmrc2018 --split test \\
        --lang zh --tokenizer bigram --json

Everything runs offline: the English stemmer and stopword list ship with
PyStemmer and bm25s, and jieba ships its dictionary inside the package.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import sys
import time
import unicodedata
from typing import Callable, Dict, List, Sequence, Set

import bm25s
import numpy as np

# The number of documents retrieved for each query; Recall@100 needs 100.
TOP_K = 100

# Runs of Han ideographs: the CJK Unified Ideographs block, Extension A, the
# compatibility ideographs, and the supplementary-plane extensions.
CJK_RUN = r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]+"

# A token for the bigram tokenizer is either a run of Han ideographs or a run
# of other word characters (Latin letters, digits, and so on).  The second
# alternative excludes the Han ranges so that the two never overlap.
BIGRAM_SPLIT = re.compile(
    "(" + CJK_RUN + ")|([^\\W\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\U00020000-\U0002fa1f]+)"
)


# ---------------------------------------------------------------------------
# Data loading
# ---------------------------------------------------------------------------


def read_jsonl(path: str) -> List[dict]:
    """Reads a JSON-lines file into a list of dictionaries, skipping blank lines."""
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def read_qrels(path: str) -> Dict[str, Set[str]]:
    """Reads a BEIR qrels TSV file and returns the relevant documents per query.

    Relevance is binary: a (query, document) pair counts as relevant when its
    score is greater than zero.  Queries whose rows all have score zero are
    kept with an empty set so that the caller can decide what to do with them.
    """
    relevant: Dict[str, Set[str]] = {}
    with open(path, encoding="utf-8") as handle:
        header = handle.readline().rstrip("\n").split("\t")
        if header[:3] != ["query-id", "corpus-id", "score"]:
            raise ValueError(f"{path}: unexpected qrels header {header!r}")
        for line_number, line in enumerate(handle, start=2):
            line = line.rstrip("\n")
            if not line:
                continue
            fields = line.split("\t")
            if len(fields) < 3:
                raise ValueError(f"{path}:{line_number}: expected three columns")
            query_id, doc_id, score = fields[0], fields[1], float(fields[2])
            docs = relevant.setdefault(query_id, set())
            if score > 0:
                docs.add(doc_id)
    return relevant


# ---------------------------------------------------------------------------
# Tokenizers
# ---------------------------------------------------------------------------
#
# Each tokenizer is a pair of functions: one that turns the whole corpus into
# something bm25s.BM25.index accepts, and one that turns a single query into a
# list of token strings that bm25s.BM25.retrieve accepts.  Keeping the query
# side as plain strings lets bm25s map them onto the index vocabulary itself,
# dropping tokens that never occur in the corpus.


class StemTokenizer:
    """English tokenization: bm25s's regex splitter, English stopwords, Snowball stemmer."""

    name = "stem"

    def __init__(self) -> None:
        # PyStemmer is imported here so that the Chinese tokenizers work even
        # if only their own dependencies were installed.
        import Stemmer

        self.stemmer = Stemmer.Stemmer("english")

    def corpus(self, texts: Sequence[str]):
        # Returning ids plus vocabulary is the fastest way to feed bm25s.
        return bm25s.tokenize(
            list(texts), stopwords="en", stemmer=self.stemmer, show_progress=False
        )

    def query(self, text: str) -> List[str]:
        return bm25s.tokenize(
            text,
            stopwords="en",
            stemmer=self.stemmer,
            return_ids=False,
            show_progress=False,
        )[0]


def is_punctuation_or_space(token: str) -> bool:
    """Tells whether every character of the token is whitespace or punctuation."""
    return all(ch.isspace() or unicodedata.category(ch).startswith("P") for ch in token)


class JiebaTokenizer:
    """Chinese tokenization with jieba's search-engine mode.

    Tokens are lowercased, and tokens made only of punctuation or whitespace
    are dropped.
    """

    name = "jieba"

    def __init__(self) -> None:
        import jieba

        # jieba logs its dictionary loading at INFO level on stderr; only
        # warnings and errors are of interest here.
        jieba.setLogLevel(logging.WARNING)
        # Loading the bundled dictionary is a one-time start-up cost, so it is
        # done here rather than inside the timed indexing step.
        jieba.initialize()
        self.lcut_for_search = jieba.lcut_for_search

    def tokens(self, text: str) -> List[str]:
        return [
            token.lower()
            for token in self.lcut_for_search(text)
            if not is_punctuation_or_space(token)
        ]

    def corpus(self, texts: Sequence[str]) -> List[List[str]]:
        return [self.tokens(text) for text in texts]

    def query(self, text: str) -> List[str]:
        return self.tokens(text)


class BigramTokenizer:
    """Chinese tokenization with overlapping character bigrams.

    Each run of Han characters yields its overlapping two-character bigrams,
    or the single character when the run has length one.  Runs of other word
    characters (Latin words, numbers) are lowercased and kept whole.
    Punctuation and whitespace separate runs and produce no tokens.
    """

    name = "bigram"

    @staticmethod
    def tokens(text: str) -> List[str]:
        out: List[str] = []
        for match in BIGRAM_SPLIT.finditer(text):
            cjk, other = match.group(1), match.group(2)
            if cjk is not None:
                if len(cjk) == 1:
                    out.append(cjk)
                else:
                    out.extend(cjk[i : i + 2] for i in range(len(cjk) - 1))
            else:
                out.append(other.lower())
        return out

    def corpus(self, texts: Sequence[str]) -> List[List[str]]:
        return [self.tokens(text) for text in texts]

    def query(self, text: str) -> List[str]:
        return self.tokens(text)


TOKENIZERS: Dict[str, Callable[[], object]] = {
    "stem": StemTokenizer,
    "jieba": JiebaTokenizer,
    "bigram": BigramTokenizer,
}

DEFAULT_TOKENIZER = {"en": "stem", "zh": "jieba"}


# ---------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------


def ndcg_at_k(ranked: Sequence[str], relevant: Set[str], k: int) -> float:
    """Binary-relevance nDCG@k with the log2(rank + 1) discount.

    The ideal DCG places min(|relevant|, k) relevant documents at the top.
    """
    dcg = sum(
        1.0 / math.log2(rank + 1)
        for rank, doc_id in enumerate(ranked[:k], start=1)
        if doc_id in relevant
    )
    ideal_hits = min(len(relevant), k)
    idcg = sum(1.0 / math.log2(rank + 1) for rank in range(1, ideal_hits + 1))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranked: Sequence[str], relevant: Set[str], k: int) -> float:
    """The share of the relevant documents that appear in the top k."""
    hits = sum(1 for doc_id in ranked[:k] if doc_id in relevant)
    return hits / len(relevant) if relevant else 0.0


def mrr_at_k(ranked: Sequence[str], relevant: Set[str], k: int) -> float:
    """The reciprocal rank of the first relevant document in the top k, else 0."""
    for rank, doc_id in enumerate(ranked[:k], start=1):
        if doc_id in relevant:
            return 1.0 / rank
    return 0.0


# ---------------------------------------------------------------------------
# Benchmark
# ---------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Benchmark bm25s indexing, query latency and quality on a BEIR-format dataset."
    )
    parser.add_argument("--dataset", required=True, help="directory holding corpus.jsonl, queries.jsonl and qrels/")
    parser.add_argument("--split", default="test", help="qrels split to evaluate (qrels/<split>.tsv); default test")
    parser.add_argument("--lang", choices=sorted(DEFAULT_TOKENIZER), default="en", help="corpus language; picks the default tokenizer")
    parser.add_argument("--tokenizer", choices=sorted(TOKENIZERS), default=None, help="tokenizer (default: stem for en, jieba for zh)")
    parser.add_argument("--k1", type=float, default=1.5, help="BM25 k1 (default 1.5)")
    parser.add_argument("--b", type=float, default=0.75, help="BM25 b (default 0.75)")
    parser.add_argument("--json", action="store_true", help="print a single-line JSON object instead of an indented one")
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> dict:
    dataset_dir = os.path.abspath(args.dataset)
    tokenizer_name = args.tokenizer or DEFAULT_TOKENIZER[args.lang]

    # Load the data.  A document is its title and text joined by one space.
    corpus = read_jsonl(os.path.join(dataset_dir, "corpus.jsonl"))
    doc_ids = [str(doc["_id"]) for doc in corpus]
    doc_texts = [(doc.get("title") or "") + " " + (doc.get("text") or "") for doc in corpus]
    corpus_bytes = sum(len(text.encode("utf-8")) for text in doc_texts)

    query_texts = {str(q["_id"]): q["text"] for q in read_jsonl(os.path.join(dataset_dir, "queries.jsonl"))}
    qrels = read_qrels(os.path.join(dataset_dir, "qrels", f"{args.split}.tsv"))

    # Only queries that appear in the qrels split and have at least one
    # relevant document are evaluated; a query without relevant documents has
    # no defined recall or nDCG.
    missing = sorted(qid for qid in qrels if qid not in query_texts)
    if missing:
        raise SystemExit(f"{len(missing)} qrels queries are missing from queries.jsonl, e.g. {missing[0]!r}")
    eval_ids = [qid for qid in query_texts if qrels.get(qid)]
    skipped = sum(1 for qid in qrels if not qrels[qid])
    if skipped:
        print(f"note: {skipped} qrels queries have no relevant document and are skipped", file=sys.stderr)

    tokenizer = TOKENIZERS[tokenizer_name]()
    k = min(TOP_K, len(doc_ids))

    # Indexing: tokenization of the whole corpus plus building the index.
    start = time.perf_counter()
    corpus_tokens = tokenizer.corpus(doc_texts)
    retriever = bm25s.BM25(k1=args.k1, b=args.b)
    retriever.index(corpus_tokens, show_progress=False)
    index_seconds = time.perf_counter() - start
    del corpus_tokens

    def search(query_text: str) -> np.ndarray:
        """Tokenizes one query and returns the indices of its top-k documents."""
        tokens = tokenizer.query(query_text)
        indices, _scores = retriever.retrieve([tokens], k=k, show_progress=False)
        return indices[0]

    # Warm-up: run every query once so that caches (the stemmer's, jieba's,
    # numpy's) are populated before anything is timed.
    for qid in eval_ids:
        search(query_texts[qid])

    # Measurement: each query on its own, tokenization included.
    latencies_ms = np.empty(len(eval_ids), dtype=np.float64)
    rankings: Dict[str, List[str]] = {}
    for i, qid in enumerate(eval_ids):
        text = query_texts[qid]
        start = time.perf_counter()
        top = search(text)
        latencies_ms[i] = (time.perf_counter() - start) * 1000.0
        rankings[qid] = [doc_ids[j] for j in top]

    # Quality, averaged over the evaluated queries.
    def mean_metric(metric: Callable[[Sequence[str], Set[str], int], float], cutoff: int) -> float:
        return float(np.mean([metric(rankings[qid], qrels[qid], cutoff) for qid in eval_ids]))

    return {
        "engine": "bm25s",
        "version": bm25s.__version__,
        "dataset": os.path.basename(dataset_dir.rstrip(os.sep)),
        "split": args.split,
        "lang": args.lang,
        "tokenizer": tokenizer_name,
        "k1": args.k1,
        "b": args.b,
        "queries": len(eval_ids),
        "docs": len(doc_ids),
        "corpus_mb": round(corpus_bytes / 1e6, 3),
        "index_seconds": round(index_seconds, 4),
        "index_docs_per_s": round(len(doc_ids) / index_seconds, 1),
        "index_mb_per_s": round(corpus_bytes / 1e6 / index_seconds, 3),
        "query_ms_p50": round(float(np.percentile(latencies_ms, 50)), 4),
        "query_ms_p99": round(float(np.percentile(latencies_ms, 99)), 4),
        "query_ms_mean": round(float(latencies_ms.mean()), 4),
        "ndcg@10": round(mean_metric(ndcg_at_k, 10), 5),
        "recall@10": round(mean_metric(recall_at_k, 10), 5),
        "recall@100": round(mean_metric(recall_at_k, 100), 5),
        "mrr@10": round(mean_metric(mrr_at_k, 10), 5),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    result = run(args)
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        print(json.dumps(result, ensure_ascii=False, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
