//! Skip entries of long posting lists, and a cursor that uses them.
//!
//! A term's postings (`postings.rs`) are one varint stream, read in order.
//! For a list of more than [`BLOCK`] postings the segment also keeps one
//! fixed-size entry per block of [`BLOCK`] postings: the block's last
//! ordinal, where its bytes end, and the largest term frequency and the
//! smallest field length of its passages, per field and for the flat word
//! field. A cursor jumps over whole blocks to reach an ordinal without
//! decoding them, and the frequencies and lengths bound what any passage
//! of a block can score under any BM25 parameters (a score rises with the
//! frequency and falls with the length), which lets the ranking skip blocks
//! that cannot reach the top k (`maxscore.rs`).
//!
//! The entries are little-endian records of [`ENTRY_BYTES`] bytes, in term
//! order, in one buffer of the segment: the same bytes in memory and in the
//! index file, read in place from a mapped file. Damaged entries (only a
//! crafted file could hold them: the file's checksum catches damage) make
//! a cursor skip too far or not far enough, never read out of bounds or
//! loop.

use crate::index::{FIELDS, WORD_FIELDS};
use crate::postings::{get, Posting};

/// Postings per block.
pub(crate) const BLOCK: usize = 128;
/// Bytes of one entry: last ordinal, end, four maximum frequencies, the
/// flat maximum frequency, four minimum lengths, the flat minimum length.
pub(crate) const ENTRY_BYTES: usize = 4 + 4 + 4 * 4 + 4 + 4 * 4 + 4;

/// Blocks of a list of `count` postings that carry entries (none for a
/// list of one block).
pub(crate) fn blocks(count: u32) -> usize {
    let count = count as usize;
    if count > BLOCK {
        count.div_ceil(BLOCK)
    } else {
        0
    }
}

/// What one block says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Entry {
    /// The block's last ordinal.
    pub last: u32,
    /// Where the block's bytes end, from the start of the term's postings.
    pub end: u32,
    /// The largest frequency of the term per field.
    pub max_tf: [u32; FIELDS],
    /// The largest frequency summed over the word fields.
    pub max_word_tf: u32,
    /// The shortest length per field.
    pub min_len: [u32; FIELDS],
    /// The shortest length summed over the word fields.
    pub min_word_len: u32,
}

impl Entry {
    /// The bounds of one list's postings (`lengths` of the segment's
    /// passages), as of a block of them.
    pub(crate) fn of(block: &[Posting], lengths: &[[u32; FIELDS]], end: usize) -> Self {
        let mut e = Entry {
            last: block.last().map_or(0, |p| p.ord),
            end: end as u32,
            min_len: [u32::MAX; FIELDS],
            min_word_len: u32::MAX,
            ..Entry::default()
        };
        for p in block {
            let len = lengths[p.ord as usize];
            for ((max, min), (tf, len)) in e
                .max_tf
                .iter_mut()
                .zip(e.min_len.iter_mut())
                .zip(p.tf.iter().zip(&len))
            {
                *max = (*max).max(u32::from(*tf));
                *min = (*min).min(*len);
            }
            let word_tf: u32 = p.tf[..WORD_FIELDS].iter().map(|t| u32::from(*t)).sum();
            e.max_word_tf = e.max_word_tf.max(word_tf);
            e.min_word_len = e.min_word_len.min(len[..WORD_FIELDS].iter().sum());
        }
        e
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        let mut put = |v: u32| out.extend_from_slice(&v.to_le_bytes());
        put(self.last);
        put(self.end);
        self.max_tf.iter().for_each(|v| put(*v));
        put(self.max_word_tf);
        self.min_len.iter().for_each(|v| put(*v));
        put(self.min_word_len);
    }

    /// Entry `i` of `bytes`; `None` past their end.
    pub(crate) fn read(bytes: &[u8], i: usize) -> Option<Self> {
        let at = i.checked_mul(ENTRY_BYTES)?;
        let b = bytes.get(at..at.checked_add(ENTRY_BYTES)?)?;
        let word =
            |k: usize| u32::from_le_bytes([b[4 * k], b[4 * k + 1], b[4 * k + 2], b[4 * k + 3]]);
        Some(Entry {
            last: word(0),
            end: word(1),
            max_tf: std::array::from_fn(|f| word(2 + f)),
            max_word_tf: word(2 + FIELDS),
            min_len: std::array::from_fn(|f| word(3 + FIELDS + f)),
            min_word_len: word(3 + 2 * FIELDS),
        })
    }
}

/// Appends the entries of `list` (written as `bytes`, starting at `start`
/// of them) to `out`.
pub(crate) fn write_entries(
    out: &mut Vec<u8>,
    list: &[Posting],
    ends: &[usize],
    lengths: &[[u32; FIELDS]],
) {
    if blocks(list.len() as u32) == 0 {
        return;
    }
    for (i, block) in list.chunks(BLOCK).enumerate() {
        let end = ends[(i * BLOCK + block.len()) - 1];
        Entry::of(block, lengths, end).write(out);
    }
}

/// A position in one term's postings that moves forward only.
#[derive(Clone)]
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    /// The term's entries (empty for a list of one block).
    skips: &'a [u8],
    /// Bytes read so far.
    at: usize,
    /// Postings read so far.
    read: usize,
    prev: Option<u32>,
    /// Ordinals at or past it end the list (the segment's passages).
    bound: u32,
    current: Option<Posting>,
    /// The block [`Cursor::block_at`] last looked at.
    shallow: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor on the first posting.
    pub(crate) fn new(bytes: &'a [u8], skips: &'a [u8], bound: u32) -> Self {
        let mut c = Cursor {
            bytes,
            skips,
            at: 0,
            read: 0,
            prev: None,
            bound,
            current: None,
            shallow: 0,
        };
        c.step();
        c
    }

    /// The posting under the cursor; `None` once the list is exhausted.
    #[inline]
    pub(crate) fn current(&self) -> Option<Posting> {
        self.current
    }

    /// The ordinal under the cursor (`u32::MAX` once exhausted).
    #[inline]
    pub(crate) fn ord(&self) -> u32 {
        self.current.map_or(u32::MAX, |p| p.ord)
    }

    /// Moves to the next posting.
    pub(crate) fn step(&mut self) {
        self.current = None;
        if self.at >= self.bytes.len() {
            return;
        }
        let Some(p) = get(self.bytes, &mut self.at, self.prev) else {
            self.at = self.bytes.len();
            return;
        };
        if p.ord >= self.bound {
            self.at = self.bytes.len();
            return;
        }
        self.prev = Some(p.ord);
        self.read += 1;
        self.current = Some(p);
    }

    /// Moves to the first posting at or past `target` (staying put when
    /// already there), jumping over whole blocks that end before it.
    pub(crate) fn seek(&mut self, target: u32) {
        if self.ord() >= target {
            return;
        }
        if !self.skips.is_empty() {
            // The block of the posting under the cursor is `(read - 1) /
            // BLOCK`; jump to the first later block that may hold `target`.
            let here = self.read.saturating_sub(1) / BLOCK;
            let mut b = here;
            while let Some(e) = Entry::read(self.skips, b) {
                if e.last >= target {
                    break;
                }
                b += 1;
            }
            if b > here {
                match Entry::read(self.skips, b - 1) {
                    Some(e) if (e.end as usize) > self.at => {
                        self.at = e.end as usize;
                        self.prev = Some(e.last);
                        self.read = b * BLOCK;
                        self.step();
                    }
                    _ => {}
                }
            }
        }
        while self.ord() < target {
            self.step();
        }
    }

    /// The entry of the block holding the first posting at or past
    /// `target` (`None` for a list without entries, or past its last
    /// block), without decoding: only a block pointer of its own moves, so
    /// targets must not decrease between calls.
    pub(crate) fn block_at(&mut self, target: u32) -> Option<Entry> {
        if self.skips.is_empty() {
            return None;
        }
        self.shallow = self.shallow.max(self.read.saturating_sub(1) / BLOCK);
        loop {
            let e = Entry::read(self.skips, self.shallow)?;
            if e.last >= target {
                return Some(e);
            }
            self.shallow += 1;
        }
    }

    /// Whether the list has skip entries (more than one block).
    pub(crate) fn has_entries(&self) -> bool {
        !self.skips.is_empty()
    }

    /// Every entry of the list.
    pub(crate) fn entries(&self) -> impl Iterator<Item = Entry> + 'a {
        let skips = self.skips;
        (0..skips.len() / ENTRY_BYTES).map_while(move |i| Entry::read(skips, i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postings::put;
    use proptest::prelude::*;

    fn encoded(list: &[Posting], lengths: &[[u32; FIELDS]]) -> (Vec<u8>, Vec<u8>) {
        let mut bytes = Vec::new();
        let mut ends = Vec::new();
        let mut prev = None;
        for p in list {
            put(&mut bytes, prev, p);
            prev = Some(p.ord);
            ends.push(bytes.len());
        }
        let mut skips = Vec::new();
        write_entries(&mut skips, list, &ends, lengths);
        (bytes, skips)
    }

    proptest! {
        #[test]
        fn seeking_finds_what_a_walk_finds(
            ords in proptest::collection::btree_set(0u32..5000, 0..700),
            targets in proptest::collection::vec(0u32..5200, 1..40),
            tf in 1u16..5,
        ) {
            let list: Vec<Posting> = ords
                .iter()
                .map(|&ord| Posting { ord, tf: [tf, (ord % 3) as u16, 0, 1] })
                .collect();
            let lengths: Vec<[u32; FIELDS]> = (0..5000u32).map(|o| [o % 7 + 1, o % 11 + 2, 0, 3]).collect();
            let (bytes, skips) = encoded(&list, &lengths);
            prop_assert_eq!(skips.len(), blocks(list.len() as u32) * ENTRY_BYTES);
            let mut targets = targets;
            targets.sort_unstable();
            let mut c = Cursor::new(&bytes, &skips, 5000);
            for t in targets {
                let want = list.iter().find(|p| p.ord >= t).copied();
                if let Some(e) = c.block_at(t) {
                    // The block's bounds hold for the posting found.
                    let p = want.unwrap();
                    prop_assert!(e.last >= p.ord);
                    prop_assert!(p.tf.iter().zip(&e.max_tf).all(|(a, b)| u32::from(*a) <= *b));
                    let len = lengths[p.ord as usize];
                    prop_assert!(len.iter().zip(&e.min_len).all(|(a, b)| a >= b));
                }
                c.seek(t);
                prop_assert_eq!(c.current(), want);
            }
        }
    }

    #[test]
    fn damaged_entries_never_read_out_of_bounds() {
        let list: Vec<Posting> = (0..600)
            .map(|o| Posting {
                ord: o * 2,
                tf: [1, 0, 0, 0],
            })
            .collect();
        let lengths = vec![[1u32; FIELDS]; 1200];
        let (bytes, mut skips) = encoded(&list, &lengths);
        // Every byte of the entries overwritten in turn with extremes.
        for i in 0..skips.len() {
            for v in [0u8, 0x7f, 0xff] {
                let keep = skips[i];
                skips[i] = v;
                let mut c = Cursor::new(&bytes, &skips, 1200);
                for t in [3, 300, 301, 900, 1199, 5000] {
                    let _ = c.block_at(t);
                    c.seek(t);
                    assert!(c.ord() >= t);
                }
                skips[i] = keep;
            }
        }
        // A truncated entry buffer reads as fewer entries.
        let c = Cursor::new(&bytes, &skips[..ENTRY_BYTES + 3], 1200);
        assert_eq!(c.entries().count(), 1);
    }
}
