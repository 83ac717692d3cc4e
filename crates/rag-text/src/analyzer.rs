//! The bilingual analyzer.

use crate::latin;
use crate::normalize::{normalize, Normalized};
use crate::stopwords;
use crate::{is_han, Language, Token, TokenKind};
use jieba_rs::Jieba;
use rust_stemmers::{Algorithm, Stemmer};
use rustc_hash::FxHashSet;
use std::sync::{Arc, OnceLock};

/// Name recorded by stores next to analysed data.
pub const ANALYZER_NAME: &str = "zh_en";
/// Bumped whenever the analyzer's output changes for some input; stores
/// rebuild their lexical indexes when it differs from what they recorded.
pub const ANALYZER_VERSION: u32 = 2;

/// Index mode emits extra tokens (the characters of longer Chinese words);
/// query mode does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Analysing text to index.
    Index,
    /// Analysing a query.
    Query,
}

fn base_jieba() -> &'static Arc<Jieba> {
    static JIEBA: OnceLock<Arc<Jieba>> = OnceLock::new();
    JIEBA.get_or_init(|| Arc::new(Jieba::new()))
}

struct StopSets {
    en: FxHashSet<&'static str>,
    zh: FxHashSet<&'static str>,
}

fn stop_sets() -> &'static StopSets {
    static SETS: OnceLock<StopSets> = OnceLock::new();
    SETS.get_or_init(|| StopSets {
        en: stopwords::ENGLISH.iter().copied().collect(),
        zh: stopwords::CHINESE.iter().copied().collect(),
    })
}

/// The Chinese + English analyzer. Cheap to clone, and cheap to create:
/// jieba's default dictionary (about 0.1 s to load) is read once per
/// process, on first use (or by [`Analyzer::preload`]), so commands that
/// never analyse text never pay for it.
#[derive(Clone)]
pub struct Analyzer {
    /// `None`: the shared default dictionary.
    jieba: Option<Arc<Jieba>>,
}

impl std::fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Analyzer")
            .field("name", &ANALYZER_NAME)
            .field("version", &ANALYZER_VERSION)
            .finish()
    }
}

impl Default for Analyzer {
    fn default() -> Self {
        Self::new()
    }
}

/// Everything one analysis produces.
struct Sink<'a> {
    tokens: &'a mut Vec<Token>,
    position: u32,
}

impl Analyzer {
    /// The analyzer with jieba's default dictionary.
    pub fn new() -> Self {
        Analyzer { jieba: None }
    }

    /// Loads the default dictionary now (a server calls this at start, off
    /// its async runtime, so its first query does not wait for it).
    pub fn preload() {
        base_jieba();
    }

    fn jieba(&self) -> &Jieba {
        self.jieba.as_deref().unwrap_or_else(|| base_jieba())
    }

    /// A copy whose segmenter also knows `words` (a knowledge base's user dictionary).
    pub fn with_user_words<'a>(
        &self,
        words: impl IntoIterator<Item = (&'a str, Option<u32>)>,
    ) -> Self {
        let mut words = words.into_iter().peekable();
        if words.peek().is_none() {
            return self.clone();
        }
        let mut jieba = self.jieba().clone();
        for (w, freq) in words {
            let w = normalize(w).text;
            if !w.trim().is_empty() {
                jieba.add_word(w.trim(), freq.map(|f| f as usize), None);
            }
        }
        Analyzer {
            jieba: Some(Arc::new(jieba)),
        }
    }

    /// How common the segmenter's dictionary says `word` is (its count in
    /// jieba's corpus), 0 for a word it does not know.
    pub fn word_frequency(&self, word: &str) -> usize {
        let jieba = self.jieba();
        if jieba.has_word(word) {
            jieba.suggest_freq(word)
        } else {
            0
        }
    }

    /// Analyses `text` into search terms with offsets into `text`.
    pub fn analyze(&self, text: &str, mode: Mode) -> Vec<Token> {
        let mut tokens = Vec::new();
        self.analyze_into(text, mode, &mut tokens);
        tokens
    }

    /// Like [`Analyzer::analyze`], appending to `out` (which is not cleared).
    ///
    /// English stop words are dropped; Chinese ones are kept as
    /// [`TokenKind::HanStop`] (and the bigrams touching a one-character one
    /// as [`TokenKind::HanStopBigram`]): they add to the score of passages
    /// the other terms find, and never find one alone.
    ///
    /// In query mode, when every term is a stop word, the stop words are kept
    /// as ordinary terms so that a query such as "the who" or 怎么样 still
    /// searches for something.
    pub fn analyze_into(&self, text: &str, mode: Mode, out: &mut Vec<Token>) {
        let norm = normalize(text);
        let first = out.len();
        self.run(text, &norm, mode, true, out);
        if mode == Mode::Query && out[first..].iter().all(|t| !t.kind.retrieves()) {
            out.truncate(first);
            self.run(text, &norm, mode, false, out);
        }
    }

    /// Surface words of `text` (normalised, unstemmed, stop words removed):
    /// what the substring path looks for.
    pub fn key_terms(&self, text: &str) -> Vec<String> {
        let norm = normalize(text);
        let mut terms: Vec<String> = Vec::new();
        let stops = stop_sets();
        self.walk_runs(&norm.text, |run, start, end| match run {
            Run::Han => {
                // Runs of single characters (what jieba makes of unknown words and
                // typos, e.g. 退宽 → 退 + 宽) are kept together as one term.
                let mut singles = String::new();
                for t in self.jieba().cut(&norm.text[start..end], true) {
                    let single = t.word.chars().count() == 1;
                    if single && !stops.zh.contains(t.word) {
                        singles.push_str(t.word);
                        continue;
                    }
                    if !singles.is_empty() {
                        terms.push(std::mem::take(&mut singles));
                    }
                    if !single && !stops.zh.contains(t.word) {
                        terms.push(t.word.to_owned());
                    }
                }
                if !singles.is_empty() {
                    terms.push(singles);
                }
            }
            Run::Latin => latin::split_run(&norm.text, start, end, |w| {
                let word = &norm.text[w.start..w.end];
                if !stops.en.contains(word) && word.chars().count() > 1 {
                    terms.push(word.to_owned());
                }
            }),
        });
        let mut seen = FxHashSet::default();
        terms.retain(|t| seen.insert(t.clone()));
        terms
    }

    fn walk_runs(&self, text: &str, mut f: impl FnMut(Run, usize, usize)) {
        let mut current: Option<(Run, usize)> = None;
        for (i, c) in text.char_indices() {
            let kind = if is_han(c) {
                Some(Run::Han)
            } else if c.is_whitespace() || (!c.is_alphanumeric() && !c.is_ascii_punctuation()) {
                None
            } else {
                Some(Run::Latin)
            };
            match (current, kind) {
                (Some((k, _)), Some(k2)) if k == k2 => {}
                (cur, next) => {
                    if let Some((k, s)) = cur {
                        f(k, s, i);
                    }
                    current = next.map(|k| (k, i));
                }
            }
        }
        if let Some((k, s)) = current {
            f(k, s, text.len());
        }
    }

    fn run(
        &self,
        original: &str,
        norm: &Normalized,
        mode: Mode,
        drop_stops: bool,
        out: &mut Vec<Token>,
    ) {
        let mut sink = Sink {
            tokens: out,
            position: 0,
        };
        let stemmer = Stemmer::create(Algorithm::English);
        let stops = stop_sets();
        let text = norm.text.as_str();
        self.walk_runs(text, |run, start, end| match run {
            Run::Han => {
                let segment = &text[start..end];
                // Queries use the precise cut (a compound counts once); indexed text uses
                // search mode, which adds the sub-words of compounds.
                let words = if mode == Mode::Query {
                    self.jieba().cut(segment, true)
                } else {
                    self.jieba().cut_for_search(segment, true)
                };
                let mut seen: FxHashSet<&str> = FxHashSet::default();
                for t in words {
                    let word = t.word;
                    seen.insert(word);
                    let stop = drop_stops && stops.zh.contains(word);
                    let (s, e) = (start + t.byte_start, start + t.byte_end);
                    let (os, oe) = norm.original_range(s, e);
                    let pos = sink.position;
                    sink.tokens.push(Token {
                        text: word.to_owned(),
                        start: os,
                        end: oe,
                        position: pos,
                        kind: if stop {
                            TokenKind::HanStop
                        } else {
                            TokenKind::Han
                        },
                    });
                    if mode == Mode::Index && !stop && word.chars().count() > 1 {
                        for (ci, c) in word.char_indices() {
                            let (cs, ce) = norm.original_range(s + ci, s + ci + c.len_utf8());
                            sink.tokens.push(Token {
                                text: c.to_string(),
                                start: cs,
                                end: ce,
                                position: pos,
                                kind: TokenKind::HanChar,
                            });
                        }
                    }
                    sink.position += 1;
                }
                {
                    // Character bigrams of the run that are not already words: they
                    // match across segmentation differences between query and text.
                    // Bigrams touching a one-character stop word (是, 的…) only
                    // score, as stop words do.
                    let chars: Vec<(usize, char)> = segment.char_indices().collect();
                    let is_stop_char = |c: char| {
                        let mut buf = [0u8; 4];
                        drop_stops && stops.zh.contains(&*c.encode_utf8(&mut buf))
                    };
                    let mut bigrams = Vec::new();
                    for w in chars.windows(2) {
                        let (a, b) = (w[0].0, w[1].0 + w[1].1.len_utf8());
                        let gram = &segment[a..b];
                        if seen.contains(gram) {
                            continue;
                        }
                        let stop = is_stop_char(w[0].1) || is_stop_char(w[1].1);
                        let (os, oe) = norm.original_range(start + a, start + b);
                        bigrams.push(Token {
                            text: gram.to_owned(),
                            start: os,
                            end: oe,
                            position: sink.position,
                            kind: if stop {
                                TokenKind::HanStopBigram
                            } else {
                                TokenKind::HanBigram
                            },
                        });
                    }
                    sink.tokens.extend(bigrams);
                }
            }
            Run::Latin => latin::split_run(text, start, end, |w| {
                let word = &text[w.start..w.end];
                let (os, oe) = norm.original_range(w.start, w.end);
                let has_digit = word.bytes().any(|b| b.is_ascii_digit());
                let has_alpha = word.chars().any(|c| c.is_alphabetic());
                let (kind, term) = if has_digit && !has_alpha {
                    (TokenKind::Number, word.to_owned())
                } else if word.contains(['-', '_', '.', ':', '/', ',']) {
                    (TokenKind::Ident, word.to_owned())
                } else if has_digit {
                    // Letters and digits (E2Fs, Rad53, iPhone15): stemmed
                    // like words unless written in capitals, so that a plural
                    // finds its singular (E2Fs → e2f; SciFact train lexical
                    // 0.6972 → 0.6978, docs/quality.md).
                    if word.is_ascii() && !is_acronym(&original[os..oe]) {
                        (TokenKind::Ident, stemmer.stem(word).into_owned())
                    } else {
                        (TokenKind::Ident, word.to_owned())
                    }
                } else {
                    if word.chars().count() < 2 || (drop_stops && stops.en.contains(word)) {
                        return;
                    }
                    if is_acronym(&original[os..oe]) {
                        (TokenKind::Ident, word.to_owned())
                    } else if word.is_ascii() {
                        (TokenKind::Word, stemmer.stem(word).into_owned())
                    } else {
                        (TokenKind::Word, word.to_owned())
                    }
                };
                let pos = sink.position;
                let compound = kind == TokenKind::Ident && word.contains(['-', '_', '/']);
                sink.tokens.push(Token {
                    text: term,
                    start: os,
                    end: oe,
                    position: pos,
                    kind,
                });
                if compound {
                    // The parts of a compound are searchable on their own too
                    // (interleukin-6 → interleukin, il-6 → il), at the same position.
                    let mut offset = w.start;
                    for part in word.split(['-', '_', '/']) {
                        let (ps, pe) = (offset, offset + part.len());
                        offset = pe + 1;
                        if part.chars().count() < 2 {
                            continue;
                        }
                        let alpha = part.chars().any(char::is_alphabetic);
                        let (kind, text) = if part.chars().any(|c| c.is_ascii_digit()) {
                            // Parts with digits are kept whole (rad53-dependent →
                            // rad53, scm3-139 → scm3 and 139).
                            let kind = if alpha {
                                TokenKind::Ident
                            } else {
                                TokenKind::Number
                            };
                            (kind, part.to_owned())
                        } else if !alpha || (drop_stops && stops.en.contains(part)) {
                            continue;
                        } else if part.is_ascii() {
                            (TokenKind::Word, stemmer.stem(part).into_owned())
                        } else {
                            (TokenKind::Word, part.to_owned())
                        };
                        let (ops, ope) = norm.original_range(ps, pe);
                        sink.tokens.push(Token {
                            text,
                            start: ops,
                            end: ope,
                            position: pos,
                            kind,
                        });
                    }
                }
                sink.position += 1;
            }),
        });
    }
}

/// Whether the original of a normalised word was written in capitals
/// (NVDA, GPU): such words are identifiers and are not stemmed.
fn is_acronym(original: &str) -> bool {
    original.chars().count() >= 2 && original.chars().all(char::is_uppercase)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Run {
    Han,
    Latin,
}

/// Guesses the language of a text from its Han characters and Latin letters.
pub fn detect_language(text: &str) -> Language {
    let mut han = 0usize;
    let mut latin = 0usize;
    for c in text.chars() {
        if is_han(c) {
            han += 1;
        } else if c.is_ascii_alphabetic() {
            latin += 1;
        }
    }
    // A Chinese character carries about as much as a short English word;
    // compare characters with letters divided by four.
    let latin_units = latin / 4;
    match (han, latin) {
        (0, 0) => Language::Unknown,
        (_, 0) => Language::Zh,
        (0, _) => Language::En,
        _ if han >= 3 * latin_units.max(1) => Language::Zh,
        _ if latin_units >= 3 * han => Language::En,
        _ => Language::Mixed,
    }
}
