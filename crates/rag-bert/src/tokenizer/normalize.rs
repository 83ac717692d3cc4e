//! Normalisation: the BERT normaliser (clean-up, spaces around Chinese
//! characters, accent stripping, lowercasing) and the other normaliser steps
//! a `tokenizer.json` may chain.

use unicode_categories::UnicodeCategories;
use unicode_normalization::UnicodeNormalization;

use super::unigram::Precompiled;
use super::BertTokenizer;

/// The BERT normaliser's settings (`"type": "BertNormalizer"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Normalizer {
    pub(super) clean_text: bool,
    pub(super) handle_chinese_chars: bool,
    pub(super) strip_accents: bool,
    pub(super) lowercase: bool,
}

/// One normaliser of the (possibly sequential) normaliser.
#[derive(Debug, Clone)]
pub(super) enum NormStep {
    Bert(Normalizer),
    Precompiled(Precompiled),
    Strip { left: bool, right: bool },
    Replace { pattern: Pattern, content: String },
    Nfc,
    Nfd,
    Nfkc,
    Nfkd,
    Lowercase,
}

/// The patterns of `Replace` normalisers this crate implements.
#[derive(Debug, Clone)]
pub(super) enum Pattern {
    Literal(String),
    /// The regular expression ` {2,}`: a run of two or more spaces.
    SpaceRun,
}

impl BertTokenizer {
    pub(super) fn normalize(&self, text: &str) -> String {
        let mut s = text.to_owned();
        for step in &self.normalizer {
            s = match step {
                NormStep::Bert(n) => n.apply(&s),
                NormStep::Precompiled(p) => p.apply(&s),
                NormStep::Strip { left, right } => {
                    let mut t = s.as_str();
                    if *left {
                        t = t.trim_start();
                    }
                    if *right {
                        t = t.trim_end();
                    }
                    t.to_owned()
                }
                NormStep::Replace {
                    pattern: Pattern::Literal(from),
                    content,
                } => s.replace(from.as_str(), content),
                NormStep::Replace {
                    pattern: Pattern::SpaceRun,
                    content,
                } => replace_space_runs(&s, content),
                NormStep::Nfc => s.nfc().collect(),
                NormStep::Nfd => s.nfd().collect(),
                NormStep::Nfkc => s.nfkc().collect(),
                NormStep::Nfkd => s.nfkd().collect(),
                NormStep::Lowercase => s.chars().flat_map(char::to_lowercase).collect(),
            };
        }
        s
    }
}

fn is_control(c: char) -> bool {
    !matches!(c, '\t' | '\n' | '\r') && c.is_other()
}

fn is_bert_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || c.is_whitespace()
}

fn is_chinese_char(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B920..=0x2CEAF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

impl Normalizer {
    fn apply(&self, text: &str) -> String {
        let mut s: String = if self.clean_text {
            text.chars()
                .filter(|&c| c != '\0' && c != '\u{FFFD}' && !is_control(c))
                .map(|c| if is_bert_whitespace(c) { ' ' } else { c })
                .collect()
        } else {
            text.to_owned()
        };
        if self.handle_chinese_chars && s.chars().any(is_chinese_char) {
            let mut spaced = String::with_capacity(s.len() + s.len() / 2);
            for c in s.chars() {
                if is_chinese_char(c) {
                    spaced.push(' ');
                    spaced.push(c);
                    spaced.push(' ');
                } else {
                    spaced.push(c);
                }
            }
            s = spaced;
        }
        if self.strip_accents {
            s = s.nfd().filter(|c| !c.is_mark_nonspacing()).collect();
        }
        if self.lowercase {
            // Character by character, like the reference library: no
            // context-dependent rules such as the final sigma.
            s = s.chars().flat_map(char::to_lowercase).collect();
        }
        s
    }
}

fn replace_space_runs(s: &str, content: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut run = 0;
    for c in s.chars() {
        if c == ' ' {
            run += 1;
            continue;
        }
        match run {
            0 => {}
            1 => out.push(' '),
            _ => out.push_str(content),
        }
        run = 0;
        out.push(c);
    }
    match run {
        0 => {}
        1 => out.push(' '),
        _ => out.push_str(content),
    }
    out
}
