//! A segment's field lengths: each passage's token count per field, and
//! beside them the two sums BM25 reads for almost every candidate (the word
//! fields' total, for the flat field mode, and the bigram field's), two
//! bytes each.
//!
//! Pruned BM25 reads one length per candidate proposed by the essential
//! lists, tens of thousands per query over a large segment, in ordinal
//! order but far apart. A full record is 16 bytes, so the table of a full
//! segment (2 MB) competes with the postings for the core's cache; the
//! short sums take a quarter of a megabyte per sum. They are exact: a sum
//! too large for two bytes is marked, and read from the full record.

use crate::index::{FIELDS, GRAMS, WORD_FIELDS};

/// A short sum too large to be held: read the full record.
const LONG: u16 = u16::MAX;

/// Field lengths, per ordinal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldLengths {
    full: Vec<[u32; FIELDS]>,
    /// The word fields' total, or [`LONG`].
    words: Vec<u16>,
    /// The bigram field's length, or [`LONG`].
    grams: Vec<u16>,
}

fn short(n: u32) -> u16 {
    u16::try_from(n).ok().filter(|n| *n != LONG).unwrap_or(LONG)
}

fn word_total(len: &[u32; FIELDS]) -> u32 {
    len[..WORD_FIELDS]
        .iter()
        .fold(0u32, |s, l| s.saturating_add(*l))
}

impl FieldLengths {
    pub(crate) fn with_capacity(n: usize) -> Self {
        FieldLengths {
            full: Vec::with_capacity(n),
            words: Vec::with_capacity(n),
            grams: Vec::with_capacity(n),
        }
    }

    pub(crate) fn push(&mut self, len: [u32; FIELDS]) {
        self.words.push(short(word_total(&len)));
        self.grams.push(short(len[GRAMS]));
        self.full.push(len);
    }

    /// Every record, in ordinal order.
    pub(crate) fn as_slice(&self) -> &[[u32; FIELDS]] {
        &self.full
    }

    /// The word fields' total length of `ord`.
    #[inline]
    pub(crate) fn words(&self, ord: usize) -> u32 {
        match self.words[ord] {
            LONG => word_total(&self.full[ord]),
            n => u32::from(n),
        }
    }

    /// The bigram field's length of `ord`.
    #[inline]
    pub(crate) fn grams(&self, ord: usize) -> u32 {
        match self.grams[ord] {
            LONG => self.full[ord][GRAMS],
            n => u32::from(n),
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.full.capacity() * size_of::<[u32; FIELDS]>()
            + (self.words.capacity() + self.grams.capacity()) * size_of::<u16>()
    }
}

impl From<Vec<[u32; FIELDS]>> for FieldLengths {
    fn from(full: Vec<[u32; FIELDS]>) -> Self {
        let mut out = FieldLengths::with_capacity(full.len());
        for len in full {
            out.push(len);
        }
        out
    }
}

impl std::ops::Index<usize> for FieldLengths {
    type Output = [u32; FIELDS];
    fn index(&self, ord: usize) -> &[u32; FIELDS] {
        &self.full[ord]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_sums_are_exact_and_long_ones_read_the_record() {
        let records = [
            [1, 2, 3, 4],
            [0, 0, 0, 0],
            [65_534, 0, 0, 65_534],
            [65_535, 0, 0, 65_535],
            [40_000, 40_000, 0, 70_000],
            [u32::MAX, 5, 0, 1],
        ];
        let l = FieldLengths::from(records.to_vec());
        assert_eq!(l.as_slice(), &records);
        for (o, r) in records.iter().enumerate() {
            assert_eq!(l.words(o), word_total(r), "{r:?}");
            assert_eq!(l.grams(o), r[GRAMS], "{r:?}");
            assert_eq!(&l[o], r);
        }
        assert_eq!(l.words(5), u32::MAX);
        assert_eq!(l.words[3], LONG);
        assert_eq!(l.words[2], 65_534);
    }
}
