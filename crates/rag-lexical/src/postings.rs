//! A segment's term postings, compressed in one byte buffer.
//!
//! Each term's postings are a byte range of the segment's buffer: per
//! passage (in increasing ordinal) the ordinal's gap to the previous one as
//! a LEB128 varint (the first ordinal as is), one byte whose low four bits
//! say which fields hold the term, and the term frequency of each of those
//! fields as a varint. A typical posting takes three or four bytes instead
//! of the twelve of a plain `(u32, [u16; 4])`, and the bytes are exactly
//! those of the index file, so reading a file checks and copies them.
//! Postings are only ever read in order (scoring, statistics, merges, and
//! the matched terms of a result list, which walk each list once).

use crate::index::FIELDS;
use crate::lists::{get_var, put_var};

/// One passage's occurrences of one term, per field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Posting {
    pub ord: u32,
    pub tf: [u16; FIELDS],
}

/// Appends `p`, which follows `prev` (the previous posting's ordinal).
pub(crate) fn put(out: &mut Vec<u8>, prev: Option<u32>, p: &Posting) {
    let gap = match prev {
        None => p.ord,
        Some(prev) => p.ord - prev,
    };
    put_var(out, u64::from(gap));
    let mut mask = 0u8;
    for (f, &tf) in p.tf.iter().enumerate() {
        if tf > 0 {
            mask |= 1 << f;
        }
    }
    out.push(mask);
    for &tf in p.tf.iter().filter(|t| **t > 0) {
        put_var(out, u64::from(tf));
    }
}

/// Reads the posting at `*at`; `None` when the bytes are not one.
pub(crate) fn get(bytes: &[u8], at: &mut usize, prev: Option<u32>) -> Option<Posting> {
    let gap = get_var(bytes, at)?;
    let ord = match prev {
        None => gap,
        Some(_) if gap == 0 => return None,
        Some(p) => p.checked_add(gap)?,
    };
    let mask = *bytes.get(*at)?;
    *at += 1;
    if mask == 0 || mask >> FIELDS != 0 {
        return None;
    }
    let mut tf = [0u16; FIELDS];
    for (f, t) in tf.iter_mut().enumerate() {
        if mask & (1 << f) != 0 {
            let v = get_var(bytes, at)?;
            *t = u16::try_from(v).ok().filter(|v| *v > 0)?;
        }
    }
    Some(Posting { ord, tf })
}

/// The postings of one term, in increasing ordinal. Bytes written by
/// [`put`] read back whole; malformed bytes (only a crafted index file could
/// hold them: the file's checksum catches damage) end the iteration early,
/// as does an ordinal at or past `bound`, so a reader never indexes past
/// the segment's passages.
#[derive(Clone)]
pub(crate) struct Postings<'a> {
    bytes: &'a [u8],
    at: usize,
    prev: Option<u32>,
    bound: u32,
}

impl<'a> Postings<'a> {
    pub(crate) fn new(bytes: &'a [u8], bound: u32) -> Self {
        Postings {
            bytes,
            at: 0,
            prev: None,
            bound,
        }
    }
}

impl Iterator for Postings<'_> {
    type Item = Posting;

    fn next(&mut self) -> Option<Posting> {
        if self.at >= self.bytes.len() {
            return None;
        }
        let p = get(self.bytes, &mut self.at, self.prev)?;
        if p.ord >= self.bound {
            self.at = self.bytes.len();
            return None;
        }
        self.prev = Some(p.ord);
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn postings_round_trip(
            entries in proptest::collection::btree_map(any::<u32>(), proptest::array::uniform4(0u16..3000), 0..80)
        ) {
            let list: Vec<Posting> = entries
                .into_iter()
                .filter(|(_, tf)| tf.iter().any(|t| *t > 0))
                .map(|(ord, tf)| Posting { ord, tf })
                .collect();
            let mut bytes = Vec::new();
            let mut prev = None;
            for p in &list {
                put(&mut bytes, prev, p);
                prev = Some(p.ord);
            }
            prop_assert_eq!(Postings::new(&bytes, u32::MAX).collect::<Vec<_>>(), list.clone());
            // A bound stops the reading before the first ordinal past it.
            if let Some(last) = list.last() {
                let below: Vec<Posting> = list.iter().copied().filter(|p| p.ord < last.ord).collect();
                prop_assert_eq!(Postings::new(&bytes, last.ord).collect::<Vec<_>>(), below);
            }
        }
    }

    #[test]
    fn malformed_postings_end_the_reading() {
        let read = |b: &[u8]| Postings::new(b, 10).map(|p| p.ord).collect::<Vec<_>>();
        // An empty field mask, a field that does not exist, a zero
        // frequency, a zero gap after the first posting, a truncated tail.
        assert!(read(&[3, 0]).is_empty());
        assert!(read(&[3, 0x10, 1]).is_empty());
        assert!(read(&[3, 1, 0]).is_empty());
        assert_eq!(read(&[3, 1, 1, 0, 1, 1]), [3]);
        assert_eq!(read(&[3, 1, 1, 2, 1]), [3]);
        assert_eq!(read(&[3, 0b1001, 2, 5, 2, 0b0010, 1]), [3, 5]);
    }
}
