//! Compressed posting lists under 64-bit keys: the n-gram index's storage.
//!
//! The keys are sorted in one array and looked up by binary search; each
//! key's list of strictly increasing `u32`s is stored as LEB128 varints of
//! the gaps (the first value as is) in one shared byte buffer. A list of
//! dense ordinals costs one or two bytes per entry instead of four, there is
//! no per-list allocation, and the bytes are exactly those of the index file
//! (`persist.rs`), so reading a file copies them after checking them.

use std::mem::size_of;

/// Sorted keys, each with a compressed list.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct PostingLists {
    keys: Vec<u64>,
    /// Entries of each list.
    counts: Vec<u32>,
    /// End of each list in `data` (its start is the previous list's end).
    ends: Vec<usize>,
    data: Vec<u8>,
}

/// Appends `v` as a LEB128 varint.
pub(crate) fn put_var(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint of at most five bytes (a `u32`); `None` when truncated or
/// too long.
pub(crate) fn get_var(bytes: &[u8], at: &mut usize) -> Option<u32> {
    let mut v: u64 = 0;
    for shift in (0..35).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return u32::try_from(v).ok();
        }
    }
    None
}

/// One list, decoded as it is read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct List<'a> {
    count: u32,
    bytes: &'a [u8],
}

impl<'a> List<'a> {
    pub(crate) fn len(&self) -> usize {
        self.count as usize
    }

    pub(crate) fn iter(&self) -> ListIter<'a> {
        ListIter {
            bytes: self.bytes,
            at: 0,
            prev: None,
        }
    }
}

/// The values of a [`List`], in increasing order.
pub(crate) struct ListIter<'a> {
    bytes: &'a [u8],
    at: usize,
    prev: Option<u32>,
}

impl Iterator for ListIter<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        let gap = get_var(self.bytes, &mut self.at)?;
        // The lists were checked when built or read: the sum cannot overflow.
        let v = match self.prev {
            None => gap,
            Some(p) => p.saturating_add(gap),
        };
        self.prev = Some(v);
        Some(v)
    }
}

/// Why bytes are not a valid list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListError {
    /// Not exactly the varints announced.
    Truncated,
    /// A value not above the one before.
    Order,
    /// Keys not strictly increasing.
    KeyOrder,
}

impl PostingLists {
    /// From plain lists (each strictly increasing).
    pub(crate) fn from_lists(mut lists: Vec<(u64, Vec<u32>)>) -> Self {
        lists.sort_unstable_by_key(|(k, _)| *k);
        let mut out = PostingLists {
            keys: Vec::with_capacity(lists.len()),
            counts: Vec::with_capacity(lists.len()),
            ends: Vec::with_capacity(lists.len()),
            data: Vec::new(),
        };
        let mut bytes = Vec::new();
        for (k, list) in lists {
            bytes.clear();
            let mut prev = 0u32;
            for (i, &v) in list.iter().enumerate() {
                put_var(&mut bytes, u64::from(if i == 0 { v } else { v - prev }));
                prev = v;
            }
            out.push_raw(k, list.len() as u32, &bytes)
                .expect("keys of a map are distinct and sorted");
        }
        out.data.shrink_to_fit();
        out
    }

    /// Appends a list given as its varint bytes after checking its shape
    /// only (exactly `count` varints, none zero after the first, so the
    /// values increase strictly), in one pass over the bytes that compiles
    /// to vector code. Values are not checked against a bound here: readers
    /// of an n-gram index drop ordinals past its passages.
    pub(crate) fn push_shaped(
        &mut self,
        key: u64,
        count: u32,
        bytes: &[u8],
    ) -> Result<(), ListError> {
        let ends = bytes.iter().filter(|b| **b < 0x80).count();
        let zeros = bytes.iter().skip(1).filter(|b| **b == 0).count();
        let terminated = bytes.last().is_none_or(|b| *b < 0x80);
        // A varint of a u32 takes at most five bytes.
        if ends != count as usize || !terminated || bytes.len() > 5 * count as usize {
            return Err(ListError::Truncated);
        }
        if zeros > 0 {
            return Err(ListError::Order);
        }
        self.push_raw(key, count, bytes)
    }

    fn push_raw(&mut self, key: u64, count: u32, bytes: &[u8]) -> Result<(), ListError> {
        if self.keys.last().is_some_and(|last| *last >= key) {
            return Err(ListError::KeyOrder);
        }
        self.keys.push(key);
        self.counts.push(count);
        self.data.extend_from_slice(bytes);
        self.ends.push(self.data.len());
        Ok(())
    }

    /// The number of keys.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    fn list(&self, i: usize) -> List<'_> {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        List {
            count: self.counts[i],
            bytes: &self.data[start..self.ends[i]],
        }
    }

    /// The list under `key`.
    pub(crate) fn get(&self, key: u64) -> Option<List<'_>> {
        let i = self.keys.binary_search(&key).ok()?;
        Some(self.list(i))
    }

    /// Every key with its list, in key order (for encoding).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u32, &[u8])> + '_ {
        (0..self.keys.len()).map(move |i| {
            let l = self.list(i);
            (self.keys[i], l.count, l.bytes)
        })
    }

    /// Estimated heap bytes.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.keys.capacity() * size_of::<u64>()
            + self.counts.capacity() * size_of::<u32>()
            + self.ends.capacity() * size_of::<usize>()
            + self.data.capacity()
    }
}

/// The values of `small` (sorted) that are also in `list`.
pub(crate) fn intersect(small: &[u32], list: List<'_>) -> Vec<u32> {
    let mut out = Vec::with_capacity(small.len().min(list.len()));
    let mut it = list.iter();
    let mut cur = it.next();
    for &s in small {
        while let Some(c) = cur {
            if c >= s {
                break;
            }
            cur = it.next();
        }
        match cur {
            Some(c) if c == s => out.push(s),
            Some(_) => {}
            None => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn lists_round_trip_and_intersect(
            raw in proptest::collection::btree_map(any::<u64>(), proptest::collection::btree_set(any::<u32>(), 0..60), 0..30),
            probe in proptest::collection::btree_set(any::<u32>(), 0..40),
        ) {
            let lists: Vec<(u64, Vec<u32>)> = raw.iter().map(|(k, s)| (*k, s.iter().copied().collect())).collect();
            let p = PostingLists::from_lists(lists.clone());
            prop_assert_eq!(p.len(), lists.len());
            let probe: Vec<u32> = probe.into_iter().collect();
            for (k, list) in &lists {
                let got = p.get(*k).unwrap();
                prop_assert_eq!(got.len(), list.len());
                prop_assert_eq!(got.iter().collect::<Vec<_>>(), list.clone());
                let want: Vec<u32> = probe.iter().copied().filter(|v| list.contains(v)).collect();
                prop_assert_eq!(intersect(&probe, got), want);
            }
            // Re-reading the encoded lists gives the same value.
            let mut again = PostingLists::default();
            for (k, n, bytes) in p.iter() {
                again.push_shaped(k, n, bytes).unwrap();
            }
            prop_assert_eq!(again, p);
        }
    }

    #[test]
    fn malformed_lists_are_refused() {
        let mut p = PostingLists::default();
        // Truncated varint, a zero gap, a list with extra bytes, a
        // non-minimal zero, then keys out of order.
        assert_eq!(p.push_shaped(1, 1, &[0x80]), Err(ListError::Truncated));
        assert_eq!(p.push_shaped(1, 2, &[1, 0]), Err(ListError::Order));
        assert_eq!(p.push_shaped(1, 1, &[1, 1]), Err(ListError::Truncated));
        assert_eq!(p.push_shaped(1, 1, &[0x80, 0]), Err(ListError::Order));
        assert_eq!(
            p.push_shaped(1, 1, &[0x80, 0x80, 0x80, 0x80, 0x80, 1]),
            Err(ListError::Truncated)
        );
        assert_eq!(p.push_shaped(5, 2, &[1, 2]), Ok(()));
        assert_eq!(p.push_shaped(5, 1, &[1]), Err(ListError::KeyOrder));
        assert_eq!(p.push_shaped(6, 0, &[]), Ok(()));
        assert_eq!(p.get(5).unwrap().iter().collect::<Vec<_>>(), [1, 3]);
        assert_eq!(
            get_var(&[0xff, 0xff, 0xff, 0xff, 0x7f], &mut 0),
            None,
            "over 32 bits"
        );
    }
}
