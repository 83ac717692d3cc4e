//! Chunking properties (proptest) and budget behaviour on long texts.

use proptest::prelude::*;
use rag_ingest::{
    chunk, extract, ApproxTokenCounter, ChunkParams, Content, DocChunk, ExtractedDoc, Limits,
    TokenCounter,
};

fn doc(name: &str, src: &str) -> Option<ExtractedDoc> {
    match extract(name, None, src.as_bytes(), &Limits::default()) {
        Ok(ex) => match ex.content {
            Content::Document(d) => Some(d),
            Content::Faqs { .. } => None,
        },
        Err(_) => None,
    }
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

/// Invariants every chunking must satisfy.
fn check_chunks(
    d: &ExtractedDoc,
    chunks: &[DocChunk],
    p: &ChunkParams,
    counter: &dyn TokenCounter,
) {
    let text = &d.text;
    assert!(!chunks.is_empty(), "a non-empty document has chunks");
    let mut covered = 0; // every non-whitespace byte before this is in a chunk
    let mut prev: Option<&DocChunk> = None;
    for (i, c) in chunks.iter().enumerate() {
        assert_eq!(c.ordinal as usize, i);
        assert_eq!(
            c.text,
            text[c.start..c.end],
            "chunk text is the slice of the extracted text"
        );
        assert_eq!(c.char_start, text[..c.start].chars().count());
        assert_eq!(c.char_end, text[..c.end].chars().count());
        assert!(
            !c.text.is_empty() && c.text.trim() == c.text,
            "chunk {i} is trimmed and non-empty: {:?}",
            c.text
        );
        assert_eq!(c.hash, rag_ingest::sha256_hex(c.text.as_bytes()));
        assert_eq!(c.tokens, counter.count_tokens(&c.text));
        if let Some(pc) = prev {
            assert!(
                c.start >= pc.start && c.end > pc.end,
                "chunks in order: {pc:?} then {c:?}"
            );
        }
        assert!(
            text[covered.min(c.start)..c.start].trim().is_empty(),
            "gap before chunk {i} holds text: {:?}",
            &text[covered..c.start]
        );
        covered = covered.max(c.end);
        if text.chars().count() >= p.min_split_chars {
            assert!(
                c.tokens <= p.target_tokens || c.text.chars().count() == 1,
                "chunk {i} over budget: {} tokens: {:?}",
                c.tokens,
                c.text
            );
        }
        // Never inside a word (the generator keeps words far below the budget).
        for at in [c.start, c.end] {
            let before = text[..at].chars().next_back();
            let after = text[at..].chars().next();
            assert!(
                !(before.is_some_and(is_word_char) && after.is_some_and(is_word_char)),
                "cut inside a word at {at} in {:?}",
                c.text
            );
        }
        prev = Some(c);
    }
    assert!(
        text[covered..].trim().is_empty(),
        "text after the last chunk"
    );
}

const PIECES: &[&str] = &[
    "alpha",
    "Dr.",
    "3.5km",
    "refund",
    "NVDA",
    "e.g.",
    "end.",
    "Why?",
    "yes!",
    "退款",
    "营业时间是几点",
    "。",
    "，",
    "！",
    "？",
    "；",
    "……",
    "“好的。”",
    "𠮷",
    "# Title",
    "## Part",
    "### 小节",
    "- item",
    "1. step",
    "`code`",
    "[link](http://x.y)",
    "|a|b|",
];
const SEPS: &[&str] = &[" ", " ", " ", "\n", "\n\n", "\n\n## Section\n\n"];

fn source() -> impl Strategy<Value = String> {
    prop::collection::vec((0..PIECES.len(), 0..SEPS.len()), 0..300).prop_map(|v| {
        v.into_iter()
            .map(|(p, s)| format!("{}{}", PIECES[p], SEPS[s]))
            .collect()
    })
}

/// `min_target` keeps the budget above the longest generated word.
fn params(min_target: usize) -> impl Strategy<Value = ChunkParams> {
    (
        min_target..min_target * 10,
        0usize..100,
        prop_oneof![Just(0usize), Just(200), 0usize..400],
    )
        .prop_map(|(t, o, m)| ChunkParams {
            target_tokens: t,
            overlap_tokens: o * t / 200,
            min_split_chars: m,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn chunks_are_exact_ordered_and_cover_markdown(src in source(), p in params(8)) {
        if let Some(d) = doc("x.md", &src) {
            let chunks = chunk(&d, &p, &ApproxTokenCounter).unwrap();
            check_chunks(&d, &chunks, &p, &ApproxTokenCounter);
        }
    }

    #[test]
    fn chunks_are_exact_ordered_and_cover_text(src in source(), p in params(24)) {
        if let Some(d) = doc("x.txt", &src) {
            // A counter that is not additive over pieces: one token per byte.
            let bytes = |s: &str| s.len();
            let chunks = chunk(&d, &p, &bytes).unwrap();
            check_chunks(&d, &chunks, &p, &bytes);
        }
    }
}

#[test]
fn long_paragraphs_fit_the_budget_with_overlap() {
    let sentence = "The motor lifts the desk smoothly and quietly. ";
    let src = format!(
        "# Desk\n\n{}\n\n{}",
        sentence.repeat(40),
        "桌腿高度可以调节，范围是六十到一百二十厘米。".repeat(30)
    );
    let d = doc("d.md", &src).unwrap();
    let p = ChunkParams {
        target_tokens: 100,
        overlap_tokens: 20,
        min_split_chars: 200,
    };
    let chunks = chunk(&d, &p, &ApproxTokenCounter).unwrap();
    check_chunks(&d, &chunks, &p, &ApproxTokenCounter);
    assert!(chunks.len() > 8, "{}", chunks.len());
    // Consecutive chunks overlap by whole sentences.
    let overlapping = chunks.windows(2).filter(|w| w[1].start < w[0].end).count();
    assert!(
        overlapping >= chunks.len() / 2,
        "{overlapping} of {}",
        chunks.len()
    );
    for w in chunks.windows(2).filter(|w| w[1].start < w[0].end) {
        let shared = &d.text[w[1].start..w[0].end];
        assert!(
            shared.ends_with('.') || shared.ends_with('。'),
            "overlap is whole sentences: {shared:?}"
        );
        assert!(ApproxTokenCounter.count_tokens(shared) <= 20);
    }
    assert!(chunks.iter().all(|c| c.heading_path == ["Desk"]));
}

#[test]
fn over_long_sentences_split_at_commas_then_words() {
    // A Chinese sentence with commas but no full stop, and an English run-on.
    let zh = "请在下单前确认收货地址，".repeat(20);
    let en = "and then the desk goes up ".repeat(30);
    let src = format!("{zh}\n\n{en}");
    let d = doc("x.txt", &src).unwrap();
    let p = ChunkParams {
        target_tokens: 50,
        overlap_tokens: 0,
        min_split_chars: 0,
    };
    let chunks = chunk(&d, &p, &ApproxTokenCounter).unwrap();
    check_chunks(&d, &chunks, &p, &ApproxTokenCounter);
    for c in chunks.iter().filter(|c| c.text.starts_with('请')) {
        assert!(
            c.text.ends_with('，'),
            "Chinese pieces end after a comma: {:?}",
            c.text
        );
    }
    for c in chunks.iter().filter(|c| c.text.starts_with("and")) {
        assert!(
            c.text.ends_with("up")
                || c.text.ends_with("then")
                || c.text
                    .split(' ')
                    .all(|w| "and then the desk goes up".contains(w))
        );
    }
}

#[test]
fn short_texts_are_not_split_and_bad_params_are_refused() {
    let d = doc(
        "x.md",
        "# 营业时间\n\n每天 11:00 到次日 02:00。节假日照常营业。",
    )
    .unwrap();
    let p = ChunkParams {
        target_tokens: 8,
        overlap_tokens: 0,
        min_split_chars: 200,
    };
    let chunks = chunk(&d, &p, &ApproxTokenCounter).unwrap();
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].heading_path, ["营业时间"]);
    assert_eq!(chunks[0].text, d.text);
    assert!(chunk(
        &d,
        &ChunkParams {
            target_tokens: 100,
            overlap_tokens: 60,
            min_split_chars: 0
        },
        &ApproxTokenCounter
    )
    .is_err());
    assert!(chunk(
        &d,
        &ChunkParams {
            target_tokens: 4,
            overlap_tokens: 0,
            min_split_chars: 0
        },
        &ApproxTokenCounter
    )
    .is_err());
}

#[test]
fn unchanged_chunks_keep_their_hash_after_an_edit() {
    let base = "## A\n\nFirst part of the manual. It explains the motor.\n\n## B\n\nSecond part. It explains the panel.\n\n## C\n\nThird part.";
    let edited = base.replace("Second part.", "Second part, revised.");
    let p = ChunkParams {
        target_tokens: 30,
        overlap_tokens: 0,
        min_split_chars: 0,
    };
    let a = chunk(&doc("m.md", base).unwrap(), &p, &ApproxTokenCounter).unwrap();
    let b = chunk(&doc("m.md", &edited).unwrap(), &p, &ApproxTokenCounter).unwrap();
    let same: Vec<bool> = a.iter().zip(&b).map(|(x, y)| x.hash == y.hash).collect();
    assert_eq!(same, [true, false, true]);
}

/// Rough throughput, printed (run with `--nocapture`); asserts only a very
/// loose bound so a pathological (quadratic) regression fails.
#[test]
fn chunking_a_large_document_is_fast_enough() {
    let para = "桌面需要两个人一起安装，先把桌面放在软垫上。The motor lifts 120 kg at 38 mm/s. 拧紧所有螺丝后再翻转桌子！";
    let mut src = String::new();
    for i in 0..4000 {
        if i % 50 == 0 {
            src.push_str(&format!("## Section {i}\n\n"));
        }
        src.push_str(para);
        src.push_str(if i % 3 == 0 { "\n\n" } else { " " });
    }
    let d = doc("big.md", &src).unwrap();
    let t = std::time::Instant::now();
    let chunks = chunk(&d, &ChunkParams::default(), &ApproxTokenCounter).unwrap();
    let secs = t.elapsed().as_secs_f64();
    eprintln!(
        "{} bytes -> {} chunks in {:.3}s ({:.1} MB/s)",
        d.text.len(),
        chunks.len(),
        secs,
        d.text.len() as f64 / secs / 1e6
    );
    check_chunks(&d, &chunks, &ChunkParams::default(), &ApproxTokenCounter);
    assert!(secs < 20.0, "{secs}s");
}

/// Counts the bytes it is asked to count: the work chunking does.
struct MeteredCounter(std::sync::atomic::AtomicUsize);

impl TokenCounter for MeteredCounter {
    fn count_tokens(&self, text: &str) -> usize {
        self.0
            .fetch_add(text.len(), std::sync::atomic::Ordering::Relaxed);
        ApproxTokenCounter.count_tokens(text)
    }
}

/// Text without blank lines or sentence punctuation (one line of words, one
/// run of Chinese) is chunked with work linear in its length: doubling the
/// text at most doubles (plus a little) the bytes the counter reads. The
/// former splitting re-read the whole rest of the text for every piece.
#[test]
fn chunking_work_is_linear_on_text_without_breaks() {
    let words = ["alpha", "bravo", "charlie", "delta", "echo"];
    let latin = |n: usize| {
        let mut s = String::new();
        let mut i = 0;
        while s.len() < n {
            s.push_str(words[i % words.len()]);
            s.push(' ');
            i += 1;
        }
        s
    };
    let han = |n: usize| "退款须在七天内申请配送费另计".repeat(n / 42 + 1);
    for make in [&latin as &dyn Fn(usize) -> String, &han] {
        let mut work = Vec::new();
        for n in [256 << 10, 512 << 10] {
            let d = doc("one-line.txt", &make(n)).unwrap();
            let counter = MeteredCounter(Default::default());
            let p = ChunkParams::default();
            let chunks = chunk(&d, &p, &counter).unwrap();
            check_chunks(&d, &chunks, &p, &ApproxTokenCounter);
            work.push(counter.0.into_inner() as f64 / d.text.len() as f64);
        }
        assert!(
            work[1] <= work[0] * 1.1,
            "bytes counted per input byte grew from {:.1} to {:.1}",
            work[0],
            work[1]
        );
        assert!(work[1] < 100.0, "{:.1} bytes counted per byte", work[1]);
    }
}
