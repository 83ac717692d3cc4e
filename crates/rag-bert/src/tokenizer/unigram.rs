//! The SentencePiece side of `tokenizer.json`, as used by XLM-RoBERTa based
//! sentence-transformers models: the `Precompiled` normaliser (SentencePiece's
//! character map, a Darts double-array trie plus a pool of replacement
//! strings), the `Metaspace` pre-tokeniser and the `Unigram` model (Viterbi
//! over piece log-probabilities, unknown characters fused into one unknown
//! token).

use rustc_hash::FxHashMap;
use unicode_segmentation::UnicodeSegmentation;

use super::base64::base64_decode;
use super::json::FILE;
use crate::error::BertError;

/// SentencePiece's precompiled character map.
#[derive(Debug, Clone)]
pub(crate) struct Precompiled {
    units: Vec<u32>,
    pool: Vec<u8>,
}

impl Precompiled {
    /// Parses the blob: a little-endian u32 byte length of the trie, the
    /// trie's 32-bit units, then NUL-terminated replacement strings.
    pub(crate) fn from_base64(text: &str) -> Result<Self, BertError> {
        let bytes = base64_decode(text)
            .ok_or_else(|| BertError::json(FILE, "precompiled_charsmap is not valid base64"))?;
        let bad = |why: &str| BertError::json(FILE, format!("precompiled_charsmap: {why}"));
        if bytes.is_empty() {
            // An empty map: nothing is replaced.
            return Ok(Precompiled {
                units: Vec::new(),
                pool: Vec::new(),
            });
        }
        if bytes.len() < 4 {
            return Err(bad("shorter than its header"));
        }
        let trie_len = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
        // `is_multiple_of` needs Rust 1.87; the workspace supports 1.85.
        #[allow(clippy::manual_is_multiple_of)]
        let ragged = trie_len % 4 != 0;
        if ragged || 4 + trie_len > bytes.len() {
            return Err(bad("trie size does not fit the data"));
        }
        let units = bytes[4..4 + trie_len]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let pool = bytes[4 + trie_len..].to_vec();
        if std::str::from_utf8(&pool).is_err() {
            return Err(bad("replacement pool is not UTF-8"));
        }
        Ok(Precompiled { units, pool })
    }

    /// The value of the shortest key of the trie that is a prefix of `key`.
    fn first_prefix_value(&self, key: &[u8]) -> Option<u32> {
        // Darts-clone unit layout.
        let offset = |u: u32| ((u >> 10) << ((u & (1 << 9)) >> 6)) as usize;
        let label = |u: u32| u & ((1 << 31) | 0xff);
        let has_leaf = |u: u32| (u >> 8) & 1 == 1;
        let value = |u: u32| u & ((1 << 31) - 1);

        let mut node = offset(*self.units.first()?);
        for &c in key {
            node ^= usize::from(c);
            let unit = *self.units.get(node)?;
            if label(unit) != u32::from(c) {
                return None;
            }
            node ^= offset(unit);
            if has_leaf(unit) {
                return self.units.get(node).map(|&u| value(u));
            }
        }
        None
    }

    fn transform(&self, chunk: &str) -> Option<&str> {
        let start = self.first_prefix_value(chunk.as_bytes())? as usize;
        let rest = self.pool.get(start..)?;
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        std::str::from_utf8(&rest[..end]).ok()
    }

    /// Maps the text as the reference library does: whole grapheme clusters
    /// shorter than 6 bytes when the map has them, otherwise character by
    /// character.
    pub(crate) fn apply(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        for grapheme in text.graphemes(true) {
            if grapheme.len() < 6 {
                if let Some(mapped) = self.transform(grapheme) {
                    out.push_str(mapped);
                    continue;
                }
            }
            for (i, c) in grapheme.char_indices() {
                match self.transform(&grapheme[i..i + c.len_utf8()]) {
                    Some(mapped) => out.push_str(mapped),
                    None => out.push(c),
                }
            }
        }
        out
    }
}

/// When the Metaspace pre-tokeniser puts a word mark before the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prepend {
    Always,
    /// Only before the start of the input (not after an added token).
    First,
    Never,
}

/// The Metaspace pre-tokeniser.
#[derive(Debug, Clone)]
pub(crate) struct Metaspace {
    pub(crate) replacement: char,
    pub(crate) prepend: Prepend,
    pub(crate) split: bool,
}

impl Metaspace {
    /// Replaces spaces by the word mark, prepends one, and splits before
    /// every mark. `at_start` says whether `text` begins the input.
    pub(crate) fn split(&self, text: &str, at_start: bool) -> Vec<String> {
        let mut s: String = text
            .chars()
            .map(|c| if c == ' ' { self.replacement } else { c })
            .collect();
        let prepend = match self.prepend {
            Prepend::Always => true,
            Prepend::First => at_start,
            Prepend::Never => false,
        };
        if prepend && !s.starts_with(self.replacement) {
            s.insert(0, self.replacement);
        }
        if !self.split {
            return vec![s];
        }
        let mut words = Vec::new();
        let mut start = 0;
        for (i, c) in s.char_indices() {
            if c == self.replacement && i > start {
                words.push(s[start..i].to_owned());
                start = i;
            }
        }
        if start < s.len() {
            words.push(s[start..].to_owned());
        }
        words
    }
}

/// The Unigram model.
#[derive(Debug, Clone)]
pub(crate) struct Unigram {
    pieces: FxHashMap<String, (u32, f64)>,
    max_piece_chars: usize,
    unk_id: u32,
    unk_score: f64,
}

/// Penalty below the lowest piece score for an unknown character, as in
/// SentencePiece.
const UNK_PENALTY: f64 = 10.0;

impl Unigram {
    pub(crate) fn new(vocab: Vec<(String, f64)>, unk_id: u32) -> Result<Self, BertError> {
        if unk_id as usize >= vocab.len() {
            return Err(BertError::Inconsistent(format!(
                "Unigram unk_id {unk_id} is outside the vocabulary of {}",
                vocab.len()
            )));
        }
        let min_score = vocab.iter().map(|(_, s)| *s).fold(f64::INFINITY, f64::min);
        let mut pieces = FxHashMap::default();
        let mut max_piece_chars = 1;
        for (id, (piece, score)) in vocab.into_iter().enumerate() {
            max_piece_chars = max_piece_chars.max(piece.chars().count());
            // The first occurrence of a duplicated piece wins.
            pieces.entry(piece).or_insert((id as u32, score));
        }
        Ok(Unigram {
            pieces,
            max_piece_chars,
            unk_id,
            unk_score: min_score - UNK_PENALTY,
        })
    }

    pub(crate) fn unk_id(&self) -> u32 {
        self.unk_id
    }

    /// The best segmentation of one pre-tokenised word (Viterbi), with runs
    /// of unknown characters fused into one unknown token.
    pub(crate) fn encode(&self, word: &str, out: &mut Vec<u32>) {
        if word.is_empty() {
            return;
        }
        let bounds: Vec<usize> = word
            .char_indices()
            .map(|(i, _)| i)
            .chain(std::iter::once(word.len()))
            .collect();
        let n = bounds.len() - 1;
        // best[i]: (score of the best path to char boundary i, start of its
        // last token, that token's id).
        let mut best: Vec<Option<(f64, usize, u32)>> = vec![None; n + 1];
        best[0] = Some((0.0, 0, 0));
        for start in 0..n {
            let Some((here, _, _)) = best[start] else {
                continue;
            };
            let mut single = false;
            for end in start + 1..=(start + self.max_piece_chars).min(n) {
                let Some(&(id, score)) = self.pieces.get(&word[bounds[start]..bounds[end]]) else {
                    continue;
                };
                let candidate = here + score;
                if best[end].is_none_or(|(s, _, _)| candidate > s) {
                    best[end] = Some((candidate, start, id));
                }
                if end == start + 1 {
                    single = true;
                }
            }
            if !single {
                let candidate = here + self.unk_score;
                if best[start + 1].is_none_or(|(s, _, _)| candidate > s) {
                    best[start + 1] = Some((candidate, start, self.unk_id));
                }
            }
        }
        let mut tokens: Vec<(usize, usize, u32)> = Vec::new();
        let mut end = n;
        while end > 0 {
            let (_, start, id) = best[end].expect("every boundary is reachable");
            match tokens.last_mut() {
                Some(last) if id == self.unk_id && last.2 == self.unk_id => last.0 = start,
                _ => tokens.push((start, end, id)),
            }
            end = start;
        }
        for (start, end, id) in tokens.into_iter().rev() {
            if id == self.unk_id && end - start > 1 {
                // A fused run of unknown characters is looked up as a whole.
                let text = &word[bounds[start]..bounds[end]];
                out.push(self.pieces.get(text).map_or(self.unk_id, |&(id, _)| id));
            } else {
                out.push(id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metaspace_marks_and_splits_words() {
        let m = Metaspace {
            replacement: '▁',
            prepend: Prepend::Always,
            split: true,
        };
        assert_eq!(m.split("Hello world", true), ["▁Hello", "▁world"]);
        assert_eq!(m.split("a  b", false), ["▁a", "▁", "▁b"]);
        let first = Metaspace {
            prepend: Prepend::First,
            ..m.clone()
        };
        assert_eq!(first.split("x y", false), ["x", "▁y"]);
        let whole = Metaspace { split: false, ..m };
        assert_eq!(whole.split("x y", true), ["▁x▁y"]);
    }

    #[test]
    fn viterbi_prefers_likely_pieces_and_fuses_unknowns() {
        let vocab = [
            ("<unk>", 0.0),
            ("▁", -2.0),
            ("a", -3.0),
            ("b", -3.0),
            ("ab", -4.0),
            ("▁ab", -4.5),
            ("c", -3.0),
        ];
        let u = Unigram::new(
            vocab.iter().map(|(p, s)| ((*p).to_owned(), *s)).collect(),
            0,
        )
        .unwrap();
        let mut ids = Vec::new();
        u.encode("▁ab", &mut ids);
        assert_eq!(ids, [5]);
        ids.clear();
        u.encode("▁abab", &mut ids);
        assert_eq!(ids, [5, 4]);
        ids.clear();
        // x and y are unknown: one fused unknown token between known pieces.
        u.encode("cxyc", &mut ids);
        assert_eq!(ids, [6, 0, 6]);
    }
}
