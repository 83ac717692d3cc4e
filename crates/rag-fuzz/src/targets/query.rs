//! The query analyzer ([`rag_text::Analyzer`]) as the lexical index runs it
//! on a query (`LexicalIndex::analyze_query`: normalisation, language,
//! query-mode tokens, key terms), plus index mode, pinyin keys and a
//! knowledge base's user dictionary.
//!
//! An input holding a `\x01` byte is a query, then the user dictionary (one
//! word a line, optionally followed by a frequency), which the lexicon API
//! accepts from any editor of the knowledge base.

use std::cell::RefCell;

use rag_text::{
    detect_language, normalize, normalize_for_match, pinyin_key, Analyzer, Mode, Token, TokenKind,
};

use super::Sig;
use crate::mutate::Grammar;

/// Tokens of queries.
pub const GRAMMAR: Grammar = Grammar {
    dict: &[
        "退款",
        "退宽",
        "電機保修",
        "的",
        "是",
        "the ",
        "who ",
        "NVDA ",
        "interleukin-6 ",
        "il-6",
        "a_b/c-d",
        "v1.2.3",
        "3,000",
        "12:30",
        "https://example.org/x?y=1",
        "ＡＢＣ１２３",
        "ﬁ",
        "İ",
        "ß",
        "\u{0301}",
        "\u{200d}",
        "\u{3000}",
        "！？。",
        " ",
        "-",
        "_",
        "/",
        ".",
        ":",
        ",",
        "\u{1}",
        "\n",
        " 5\n",
        " 4294967295\n",
    ],
    nest: &[("(", ")"), ("\"", "\""), ("-", ""), ("_/", "")],
    text: true,
};

thread_local! {
    /// The analyzer with the last user dictionary seen (cloning jieba's
    /// dictionary costs milliseconds; the result depends only on the words).
    static WITH_WORDS: RefCell<Option<(String, Analyzer)>> = const { RefCell::new(None) };
}

fn analyzer_with(words: &str) -> Analyzer {
    WITH_WORDS.with(|cell| {
        let mut cell = cell.borrow_mut();
        if let Some((w, a)) = cell.as_ref() {
            if w == words {
                return a.clone();
            }
        }
        let parsed: Vec<(&str, Option<u32>)> = words
            .lines()
            .take(200)
            .map(|l| match l.rsplit_once(' ') {
                Some((w, f)) if f.parse::<u32>().is_ok() => (w, f.parse().ok()),
                _ => (l, None),
            })
            .collect();
        let a = Analyzer::new().with_user_words(parsed);
        *cell = Some((words.to_owned(), a.clone()));
        a
    })
}

fn check_tokens(q: &str, tokens: &[Token], mode: &str) {
    for t in tokens {
        ensure!(
            t.start < t.end && t.end <= q.len(),
            "{mode} token {:?} at {}..{} of a {}-byte query",
            t.text,
            t.start,
            t.end,
            q.len()
        );
        ensure!(
            q.is_char_boundary(t.start) && q.is_char_boundary(t.end),
            "{mode} token {:?} at {}..{} splits a character",
            t.text,
            t.start,
            t.end
        );
        ensure!(!t.text.is_empty(), "empty {mode} token at {}", t.start);
        ensure!(
            !t.text.chars().any(char::is_whitespace),
            "{mode} token {:?} holds whitespace",
            t.text
        );
    }
    let mut prev = 0;
    for t in tokens {
        ensure!(
            t.position >= prev,
            "{mode} positions go back ({} after {prev})",
            t.position
        );
        prev = t.position;
    }
}

/// Runs one input.
pub fn run(bytes: &[u8]) -> u64 {
    let mut sig = Sig::new();
    let input = String::from_utf8_lossy(bytes);
    let (q, words) = match input.split_once('\u{1}') {
        Some((q, w)) => (q, Some(w)),
        None => (&*input, None),
    };
    let analyzer = match words {
        Some(w) => analyzer_with(w),
        None => Analyzer::new(),
    };
    // LexicalIndex::analyze_query.
    let norm = normalize(q);
    if !norm.text.is_empty() {
        let (s, e) = norm.original_range(0, norm.text.len());
        ensure!(
            s <= e && e <= q.len(),
            "normalised text maps to {s}..{e} of {} bytes",
            q.len()
        );
    }
    sig.add(detect_language(&norm.text) as u8);
    let tokens = analyzer.analyze(q, Mode::Query);
    check_tokens(q, &tokens, "query");
    let key_terms = analyzer.key_terms(q);
    ensure!(
        key_terms.iter().all(|t| !t.trim().is_empty()),
        "an empty key term in {key_terms:?}"
    );
    let mut seen = std::collections::HashSet::new();
    ensure!(
        key_terms.iter().all(|t| seen.insert(t)),
        "a key term twice in {key_terms:?}"
    );
    if !q.trim().is_empty() && tokens.is_empty() {
        // A query of stop words still searches for them; only a query
        // without words may have no tokens.
        sig.add("no tokens");
    }
    let index = analyzer.analyze(q, Mode::Index);
    check_tokens(q, &index, "index");
    for t in tokens.iter().filter(|t| t.kind == TokenKind::Han).take(50) {
        sig.add(pinyin_key(&t.text).is_some());
    }
    let m = normalize_for_match(q);
    ensure!(m.trim() == m, "normalize_for_match is not trimmed: {m:?}");
    for t in &tokens {
        sig.add(t.kind as u8);
    }
    sig.magnitude(tokens.len())
        .magnitude(index.len())
        .magnitude(key_terms.len())
        .add(words.is_some())
        .finish()
}
