//! A segment's vocabulary: every term's text in one buffer, found through a
//! hash table of term ids. A term costs its bytes, a 4-byte end and a
//! table slot, where a map from an owned string to an id cost two heap
//! strings and a wider slot per term (a million-document index holds a few
//! million terms over its segments).

use hashbrown::HashTable;
use std::hash::BuildHasher;

#[derive(Debug, Default, Clone)]
pub(crate) struct Vocab {
    /// The terms' texts, one after another, in id order.
    text: String,
    /// Where each term's text ends in `text` (the next one starts there).
    ends: Vec<u32>,
    /// Term ids, hashed by their text.
    table: HashTable<u32>,
}

fn hash(s: &str) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(s)
}

/// Term `id`'s text in a buffer of texts ending at `ends`.
fn text_at<'a>(text: &'a str, ends: &[u32], id: u32) -> &'a str {
    let i = id as usize;
    let start = if i == 0 { 0 } else { ends[i - 1] as usize };
    &text[start..ends[i] as usize]
}

impl Vocab {
    /// An empty vocabulary with room for `terms` terms of `bytes` bytes.
    pub(crate) fn with_capacity(terms: usize, bytes: usize) -> Self {
        Vocab {
            text: String::with_capacity(bytes),
            ends: Vec::with_capacity(terms),
            table: HashTable::with_capacity(terms),
        }
    }

    /// The id of a term.
    pub(crate) fn get(&self, s: &str) -> Option<u32> {
        self.table.find(hash(s), |&id| self.text(id) == s).copied()
    }

    /// The text of term `id` (of [`Vocab::len`]).
    pub(crate) fn text(&self, id: u32) -> &str {
        text_at(&self.text, &self.ends, id)
    }

    /// Adds a term that is not there yet; its id is the number of terms
    /// before it. `None` when the buffer would pass 4 GiB.
    pub(crate) fn push(&mut self, s: &str) -> Option<u32> {
        debug_assert!(self.get(s).is_none(), "a term added twice");
        let end = u32::try_from(self.text.len() + s.len()).ok()?;
        let id = self.ends.len() as u32;
        self.text.push_str(s);
        self.ends.push(end);
        let (text, ends) = (&self.text, &self.ends);
        self.table
            .insert_unique(hash(s), id, |id| hash(text_at(text, ends, *id)));
        Some(id)
    }

    /// Number of terms.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(crate) fn shrink_to_fit(&mut self) {
        self.text.shrink_to_fit();
        self.ends.shrink_to_fit();
        let (text, ends) = (&self.text, &self.ends);
        self.table
            .shrink_to_fit(|id| hash(text_at(text, ends, *id)));
    }

    /// Bytes held on the heap.
    pub(crate) fn heap_bytes(&self) -> usize {
        // A table slot: the id and a control byte.
        self.text.capacity() + 4 * self.ends.capacity() + 5 * self.table.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_found_by_their_text() {
        let mut v = Vocab::default();
        let words = ["refund", "退款", "", "a", "refunds", "ref"];
        for (i, w) in words.iter().enumerate() {
            assert_eq!(v.get(w), None);
            assert_eq!(v.push(w), Some(i as u32));
        }
        v.shrink_to_fit();
        for (i, w) in words.iter().enumerate() {
            assert_eq!(v.get(w), Some(i as u32), "{w}");
            assert_eq!(v.text(i as u32), *w);
        }
        assert_eq!(v.get("refun"), None);
        assert_eq!(v.len(), words.len());
        let mut many = Vocab::with_capacity(10, 10);
        for i in 0..10_000u32 {
            assert_eq!(many.push(&format!("t{i}")), Some(i));
        }
        assert!((0..10_000u32).all(|i| many.get(&format!("t{i}")) == Some(i)));
    }
}
