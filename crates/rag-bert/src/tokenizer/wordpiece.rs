//! The WordPiece model (BERT): greedy longest-match-first pieces of each
//! word, `##` marking pieces that continue a word.

use rustc_hash::FxHashMap;

#[derive(Debug, Clone)]
pub(super) struct WordPiece {
    pub(super) vocab: FxHashMap<String, u32>,
    pub(super) unk_id: u32,
    pub(super) prefix: String,
    pub(super) max_input_chars_per_word: usize,
}

impl WordPiece {
    /// Greedy longest-match-first WordPiece of one pre-tokenised word; a word
    /// that cannot be covered by vocabulary pieces becomes one unknown token.
    pub(super) fn encode(&self, word: &str, out: &mut Vec<u32>) {
        let bounds: Vec<usize> = word
            .char_indices()
            .map(|(i, _)| i)
            .chain(std::iter::once(word.len()))
            .collect();
        let chars = bounds.len() - 1;
        if chars > self.max_input_chars_per_word {
            out.push(self.unk_id);
            return;
        }
        let mark = out.len();
        let mut candidate = String::with_capacity(word.len() + self.prefix.len());
        let mut start = 0;
        while start < chars {
            let mut end = chars;
            let mut matched = None;
            while end > start {
                candidate.clear();
                if start > 0 {
                    candidate.push_str(&self.prefix);
                }
                candidate.push_str(&word[bounds[start]..bounds[end]]);
                if let Some(&id) = self.vocab.get(candidate.as_str()) {
                    matched = Some(id);
                    break;
                }
                end -= 1;
            }
            match matched {
                Some(id) => {
                    out.push(id);
                    start = end;
                }
                None => {
                    out.truncate(mark);
                    out.push(self.unk_id);
                    return;
                }
            }
        }
    }
}
