//! Pre-tokenisation: splitting normalised text into words (the BERT
//! pre-tokeniser, whitespace splitting, Metaspace) before the model sees
//! them.

use unicode_categories::UnicodeCategories;

use super::unigram::Metaspace;
use super::BertTokenizer;

/// One pre-tokeniser of the (possibly sequential) pre-tokeniser.
#[derive(Debug, Clone)]
pub(super) enum PreStep {
    Bert,
    WhitespaceSplit,
    Metaspace(Metaspace),
}

impl BertTokenizer {
    /// Runs the pre-tokenisers in order. `at_start` says whether `text`
    /// begins the input (for Metaspace's `first` scheme).
    pub(super) fn pre_tokenize(&self, text: &str, at_start: bool) -> Vec<String> {
        // Words with their byte offset in `text`'s normalised form (only
        // whether it is zero matters).
        // Like the reference library, empty pieces are dropped before and
        // after every step (so text that normalises to nothing gives no
        // tokens, not a lone word mark).
        let mut words: Vec<(usize, String)> = vec![(0, text.to_owned())];
        words.retain(|(_, w)| !w.is_empty());
        for step in &self.pre_tokenizer {
            let mut next = Vec::with_capacity(words.len());
            for (offset, word) in &words {
                match step {
                    PreStep::Bert => {
                        for part in bert_pre_tokenize(word) {
                            next.push((offset + sub_offset(word, part), part.to_owned()));
                        }
                    }
                    PreStep::WhitespaceSplit => {
                        for part in word.split(char::is_whitespace).filter(|w| !w.is_empty()) {
                            next.push((offset + sub_offset(word, part), part.to_owned()));
                        }
                    }
                    PreStep::Metaspace(m) => {
                        for (i, part) in m
                            .split(word, at_start && *offset == 0)
                            .into_iter()
                            .enumerate()
                        {
                            next.push((if i == 0 { *offset } else { offset + 1 }, part));
                        }
                    }
                }
            }
            next.retain(|(_, w)| !w.is_empty());
            words = next;
        }
        words.into_iter().map(|(_, w)| w).collect()
    }
}

fn is_bert_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() || c.is_punctuation()
}

/// The BERT pre-tokeniser: split on whitespace (dropped), then make every
/// punctuation character a word of its own.
fn bert_pre_tokenize(text: &str) -> impl Iterator<Item = &str> {
    text.split(char::is_whitespace)
        .filter(|w| !w.is_empty())
        .flat_map(split_punctuation)
}

fn split_punctuation(word: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    for (i, c) in word.char_indices() {
        if is_bert_punctuation(c) {
            if i > start {
                parts.push(&word[start..i]);
            }
            parts.push(&word[i..i + c.len_utf8()]);
            start = i + c.len_utf8();
        }
    }
    if start < word.len() {
        parts.push(&word[start..]);
    }
    parts
}

/// Byte offset of `part`, a sub-slice of `whole`, within it.
fn sub_offset(whole: &str, part: &str) -> usize {
    part.as_ptr() as usize - whole.as_ptr() as usize
}
