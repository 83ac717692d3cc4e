//! A Chinese–English dictionary for cross-language lexical matching, read
//! from CC-CEDICT's text format (`Traditional Simplified [pin1 yin1]
//! /gloss/gloss/`). A Chinese question's words are looked up by their
//! Simplified form and give the English terms of their short glosses; an
//! English question's words give the Chinese words one of whose glosses is
//! that word alone. Both sides are analysed by the [`Analyzer`], so the
//! English terms are stemmed as the index's are.
//!
//! Compute only: the caller reads the file.

use crate::{is_han, normalize, Analyzer, Mode};
use rag_core::{Token, TokenKind};
use rustc_hash::FxHashMap;

/// English terms kept for one Chinese word (the first glosses first: the
/// dictionary lists a word's common senses before its rare ones).
const MAX_EN_TARGETS: usize = 8;
/// Chinese words kept for one English word.
const MAX_ZH_TARGETS: usize = 6;
/// A gloss with more content words than this is a description, not a
/// translation ("a kind of large flat fish found in…").
const MAX_GLOSS_WORDS: usize = 3;
/// Longest Chinese headword kept, in characters.
const MAX_HEADWORD_CHARS: usize = 8;

/// Why a dictionary could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BilingualError {
    /// No line had the dictionary's format.
    #[error("no dictionary entry found (expected CC-CEDICT lines: `Traditional Simplified [pinyin] /gloss/`)")]
    Empty,
}

/// A Chinese word that translates an English word back, with its rank
/// key: 0 when it is the entry's first sense (else 1), and the entry's
/// number of senses.
type Candidate = (Box<str>, (usize, usize));

/// The dictionary, both directions.
#[derive(Debug, Default)]
pub struct Bilingual {
    zh_en: FxHashMap<Box<str>, Box<[Box<str>]>>,
    en_zh: FxHashMap<Box<str>, Box<[Box<str>]>>,
    entries: usize,
}

/// One query word and what it translates to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Translation {
    /// The query's term (a Chinese word, or a stemmed English word).
    pub source: String,
    /// English terms (stemmed) or Chinese words, most likely first.
    pub targets: Vec<String>,
}

impl Bilingual {
    /// Reads CC-CEDICT text. Lines that are comments or not in the format
    /// are skipped; a text without one entry is an error.
    pub fn parse(text: &str, analyzer: &Analyzer) -> Result<Self, BilingualError> {
        let mut zh_en: FxHashMap<Box<str>, Vec<Box<str>>> = FxHashMap::default();
        let mut en_zh: FxHashMap<Box<str>, Vec<Candidate>> = FxHashMap::default();
        let mut entries = 0;
        for line in text.lines() {
            let Some((simplified, glosses)) = entry(line) else {
                continue;
            };
            entries += 1;
            let word = normalize(simplified).text;
            let chars = word.chars().count();
            if !(2..=MAX_HEADWORD_CHARS).contains(&chars) || !word.chars().all(is_han) {
                continue;
            }
            let word: Box<str> = word.into();
            let glosses: Vec<(Vec<String>, bool)> = glosses
                .iter()
                .filter_map(|g| clean_gloss(g))
                .map(|(g, alone)| (content_terms(analyzer, &g), alone))
                .filter(|(t, _)| (1..=MAX_GLOSS_WORDS).contains(&t.len()))
                .collect();
            let count = glosses.len();
            let targets = zh_en.entry(word.clone()).or_default();
            for (i, (terms, alone)) in glosses.iter().enumerate() {
                for t in terms {
                    if targets.len() < MAX_EN_TARGETS && !targets.iter().any(|x| **x == **t) {
                        targets.push(t.as_str().into());
                    }
                }
                if let ([only], true) = (terms.as_slice(), alone) {
                    let list = en_zh.entry(only.as_str().into()).or_default();
                    if !list.iter().any(|(w, _)| *w == word) {
                        list.push((word.clone(), (i.min(1), count)));
                    }
                }
            }
        }
        if entries == 0 {
            return Err(BilingualError::Empty);
        }
        zh_en.retain(|_, v| !v.is_empty());
        Ok(Bilingual {
            zh_en: zh_en
                .into_iter()
                .map(|(k, v)| (k, v.into_boxed_slice()))
                .collect(),
            en_zh: en_zh
                .into_iter()
                .map(|(k, mut v)| {
                    // Words whose first sense is this one first, then the
                    // commoner words (the segmenter's counts), then those
                    // with fewer senses.
                    v.sort_by_cached_key(|(w, (first, senses))| {
                        (
                            *first,
                            std::cmp::Reverse(analyzer.word_frequency(w)),
                            *senses,
                        )
                    });
                    v.truncate(MAX_ZH_TARGETS);
                    (k, v.into_iter().map(|(w, _)| w).collect())
                })
                .collect(),
            entries,
        })
    }

    /// Entries read (every well-formed line, kept or not).
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// Chinese words with English translations, English words with Chinese ones.
    pub fn sizes(&self) -> (usize, usize) {
        (self.zh_en.len(), self.en_zh.len())
    }

    /// The translations of a query's words: Chinese words of two characters
    /// or more, and English words (each once, in query order). Stop words,
    /// character bigrams and single characters are not translated: they are
    /// too ambiguous to say which word is meant.
    pub fn translate(&self, tokens: &[Token]) -> Vec<Translation> {
        let mut out: Vec<Translation> = Vec::new();
        for t in tokens {
            let targets = match t.kind {
                TokenKind::Han if t.text.chars().count() >= 2 => self.zh_en.get(t.text.as_str()),
                TokenKind::Word => self.en_zh.get(t.text.as_str()),
                _ => None,
            };
            let Some(targets) = targets else { continue };
            if out.iter().any(|x| x.source == t.text) {
                continue;
            }
            out.push(Translation {
                source: t.text.clone(),
                targets: targets.iter().map(|s| s.to_string()).collect(),
            });
        }
        out
    }
}

/// The Simplified headword and the glosses of one line.
fn entry(line: &str) -> Option<(&str, Vec<&str>)> {
    if line.starts_with('#') {
        return None;
    }
    let (_traditional, rest) = line.split_once(' ')?;
    let (simplified, rest) = rest.split_once(' ')?;
    let rest = rest.strip_prefix('[')?;
    let (_pinyin, rest) = rest.split_once(']')?;
    let glosses = rest.trim().strip_prefix('/')?.strip_suffix('/')?;
    Some((simplified, glosses.split('/').collect()))
}

/// A gloss as words to analyse: references to other entries, classifiers,
/// surnames and variants dropped, parenthesised remarks removed, and only
/// the part before a comma or semicolon kept ("Victoria, capital of
/// Seychelles" is Victoria). Also whether the gloss is one word alone
/// ("to refund", "bank"; not "to get on (a vehicle)"), the only glosses
/// that translate an English word back.
fn clean_gloss(gloss: &str) -> Option<(String, bool)> {
    const SKIP: [&str; 16] = [
        "cl:",
        "variant of",
        "old variant of",
        "archaic variant",
        "japanese variant",
        "erhua variant",
        "surname ",
        "see ",
        "abbr. for",
        "abbr. of",
        "also written",
        "also pr.",
        "used in ",
        "taiwan pr.",
        "pr. ",
        "(old)",
    ];
    let lower = gloss.trim().to_lowercase();
    if lower.chars().any(is_han) || SKIP.iter().any(|s| lower.starts_with(s)) {
        return None;
    }
    let lower = lower.split([',', ';']).next().unwrap_or_default();
    let mut out = String::with_capacity(lower.len());
    let mut depth = 0usize;
    let mut remarks = false;
    for c in lower.chars() {
        match c {
            '(' | '[' => {
                depth += 1;
                remarks = true;
            }
            ')' | ']' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    let words: Vec<&str> = out
        .split_whitespace()
        .filter(|w| {
            !matches!(
                *w,
                "sb" | "sth" | "sb's" | "sth's" | "oneself" | "one's" | "etc"
            )
        })
        .collect();
    let alone = !remarks && matches!(words.as_slice(), [_] | ["to" | "a" | "an" | "the", _]);
    (!words.is_empty()).then(|| (words.join(" "), alone))
}

/// The English terms of a cleaned gloss, as the index has them.
fn content_terms(analyzer: &Analyzer, gloss: &str) -> Vec<String> {
    let mut terms: Vec<String> = analyzer
        .analyze(gloss, Mode::Query)
        .into_iter()
        .filter(|t| matches!(t.kind, TokenKind::Word | TokenKind::Ident))
        .map(|t| t.text)
        .collect();
    terms.dedup();
    terms
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
# CC-CEDICT sample
銀行 银行 [yin2 hang2] /bank/CL:家[jia1],個|个[ge4]/
退款 退款 [tui4 kuan3] /to refund/refund/
營業時間 营业时间 [ying2 ye4 shi2 jian1] /business hours/opening hours/
岸 岸 [an4] /bank/shore/beach/coast/
河岸 河岸 [he2 an4] /riverside/river bank/
蛋白 蛋白 [dan4 bai2] /egg white/protein/albumen/
蛋白質 蛋白质 [dan4 bai2 zhi4] /protein/
鯰魚 鲶鱼 [nian2 yu2] /a kind of large freshwater catfish found in Asian rivers/catfish/
錢 钱 [qian2] /surname Qian/
not a line
";

    fn dict() -> Bilingual {
        Bilingual::parse(SAMPLE, &Analyzer::new()).unwrap()
    }

    fn query(text: &str) -> Vec<Token> {
        Analyzer::new().analyze(text, Mode::Query)
    }

    #[test]
    fn chinese_words_give_the_terms_of_their_short_glosses() {
        let t = dict().translate(&query("營業時間和退款"));
        let refund = t.iter().find(|x| x.source == "退款").unwrap();
        assert_eq!(refund.targets, vec!["refund"]);
        let hours = t.iter().find(|x| x.source == "营业时间").unwrap();
        assert_eq!(hours.targets, vec!["busi", "hour", "open"]);
        // Descriptions are not translations; the short gloss is kept.
        let fish = dict().translate(&query("鲶鱼"));
        assert_eq!(fish[0].targets, vec!["catfish"]);
    }

    #[test]
    fn english_words_give_words_whose_gloss_is_that_word_alone() {
        let d = dict();
        let t = d.translate(&query("bank refund protein"));
        let bank = t.iter().find(|x| x.source == "bank").unwrap();
        // 岸 is one character: not kept. 河岸's gloss is two words.
        assert_eq!(bank.targets, vec!["银行"]);
        let protein = t.iter().find(|x| x.source == "protein").unwrap();
        // 蛋白质's only sense first, then 蛋白's second.
        assert_eq!(protein.targets, vec!["蛋白质", "蛋白"]);
        assert!(t.iter().any(|x| x.source == "refund"));
    }

    #[test]
    fn classifiers_references_and_surnames_are_not_translations() {
        let d = dict();
        assert_eq!(d.entries(), 9);
        let bank = d.translate(&query("银行"));
        assert_eq!(bank[0].targets, vec!["bank"]);
        assert!(d.translate(&query("钱")).is_empty());
        assert!(d.translate(&query("the")).is_empty());
    }

    #[test]
    fn a_text_without_entries_is_an_error() {
        assert!(matches!(
            Bilingual::parse("# only a comment\nhello\n", &Analyzer::new()),
            Err(BilingualError::Empty)
        ));
    }
}
