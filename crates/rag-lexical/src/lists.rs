//! Compressed posting lists under 64-bit keys: the n-gram index's storage.
//!
//! The keys are sorted in one array and looked up by binary search; each
//! key's list of strictly increasing `u32`s is stored as LEB128 varints of
//! the gaps (the first value as is) in one shared byte buffer. A list of
//! dense ordinals costs one or two bytes per entry instead of four, there is
//! no per-list allocation, and the bytes are exactly those of the index file
//! (`persist.rs`), so reading a file copies them after checking them.
//!
//! A list of more than [`BLOCK`] values also has one skip entry per block
//! of [`BLOCK`]: its last value and where its bytes end, two little-endian
//! `u32`s, in key order in a buffer of their own. Intersecting a short list
//! with a long one then jumps over the long one's blocks instead of
//! decoding every value.
//!
//! A list whose values are dense (more of them than the bytes of a bitmap
//! up to its last value) is stored as that bitmap instead: bit `v % 8` of
//! byte `v / 8` is set for each value `v`, and it has no skip entries. It
//! is never larger than the varints would be (they take at least a byte a
//! value), and seeking it is a look at one byte, where a varint list is
//! read up to the value sought: the common n-grams, whose lists the
//! substring path seeks for every passage it weighs, are such lists. The
//! form needs no flag: a list of fewer bytes than values is a bitmap, since
//! varints cannot be.

use crate::blob::Blob;
use rustc_hash::FxHashMap;
use std::mem::size_of;

/// Values per skip block.
pub(crate) const BLOCK: usize = 128;
/// Bytes of one skip entry: the block's last value and its end.
const SKIP_BYTES: usize = 8;

/// Whether a list of `count` values stored in `len` bytes is a bitmap.
fn is_bitmap(count: u32, len: usize) -> bool {
    len < count as usize
}

/// Whether a list of `count` values up to `last` is stored as a bitmap: its
/// bytes are fewer than its values.
fn wants_bitmap(count: u32, last: u32) -> bool {
    (last as usize / 8 + 1) < count as usize
}

/// The bitmap of `values` (strictly increasing, up to `last`).
fn bitmap_of(values: impl Iterator<Item = u32>, last: u32) -> Vec<u8> {
    let mut bits = vec![0u8; last as usize / 8 + 1];
    for v in values {
        bits[v as usize / 8] |= 1 << (v % 8);
    }
    bits
}

/// Skip bytes of a list of `count` values in `len` bytes (none for one
/// block or a bitmap).
pub(crate) fn skip_len(count: u32, len: usize) -> usize {
    if is_bitmap(count, len) {
        return 0;
    }
    let count = count as usize;
    if count > BLOCK {
        count.div_ceil(BLOCK) * SKIP_BYTES
    } else {
        0
    }
}

/// Sorted keys, each with a compressed list.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct PostingLists {
    keys: Vec<u64>,
    /// Entries of each list.
    counts: Vec<u32>,
    /// End of each list in `data` (its start is the previous list's end).
    ends: Vec<usize>,
    data: Blob,
    /// Where each list's skip entries start in `skips`.
    skip_starts: Vec<usize>,
    skips: Blob,
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
    skips: &'a [u8],
}

impl<'a> List<'a> {
    pub(crate) fn len(&self) -> usize {
        self.count as usize
    }

    pub(crate) fn iter(&self) -> ListIter<'a> {
        ListIter {
            bytes: self.bytes,
            skips: self.skips,
            at: 0,
            read: 0,
            prev: None,
            found: None,
            bitmap: is_bitmap(self.count, self.bytes.len()),
        }
    }
}

/// The values of a [`List`], in increasing order.
pub(crate) struct ListIter<'a> {
    bytes: &'a [u8],
    skips: &'a [u8],
    at: usize,
    /// Values read so far.
    read: usize,
    prev: Option<u32>,
    /// The value [`ListIter::seek`] last found.
    found: Option<u32>,
    /// The list is a bitmap: `at` is the next bit to look at.
    bitmap: bool,
}

impl ListIter<'_> {
    /// The first value at or past `target`, jumping over the blocks that
    /// end before it; targets must not decrease between calls (the value
    /// found answers every later target up to it). Damaged entries (a
    /// crafted file) make it jump wrongly, never out of bounds or backwards.
    pub(crate) fn seek(&mut self, target: u32) -> Option<u32> {
        if let Some(v) = self.found.filter(|v| *v >= target) {
            return Some(v);
        }
        if self.bitmap {
            self.found = self.next_bit(self.at.max(target as usize));
            return self.found;
        }
        let skip = |i: usize| -> Option<(u32, u32)> {
            let b = self.skips.get(i * SKIP_BYTES..(i + 1) * SKIP_BYTES)?;
            Some((
                u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            ))
        };
        if self.prev.is_none_or(|p| p < target) && !self.skips.is_empty() {
            // The next value read is of block `read / BLOCK`; skip the
            // blocks (from that one on) whose last value is below `target`.
            let here = self.read / BLOCK;
            let mut b = here;
            while let Some((last, _)) = skip(b) {
                if last >= target {
                    break;
                }
                b += 1;
            }
            if b > here {
                if let Some((last, end)) = skip(b - 1) {
                    if end as usize > self.at {
                        self.at = end as usize;
                        self.prev = Some(last);
                        self.read = b * BLOCK;
                    }
                }
            }
        }
        self.found = self.find(|v| *v >= target);
        self.found
    }

    /// The first set bit at or past `from` of a bitmap list.
    fn next_bit(&mut self, from: usize) -> Option<u32> {
        let end = self.bytes.len() * 8;
        let mut i = from / 8;
        let mut byte = self.bytes.get(i).map(|b| b & (0xff << (from % 8)));
        while let Some(b) = byte {
            if b != 0 {
                let v = i * 8 + b.trailing_zeros() as usize;
                self.at = v + 1;
                return u32::try_from(v).ok();
            }
            i += 1;
            byte = self.bytes.get(i).copied();
        }
        self.at = end;
        None
    }
}

impl Iterator for ListIter<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        if self.bitmap {
            return self.next_bit(self.at);
        }
        let gap = get_var(self.bytes, &mut self.at)?;
        // The lists were checked when built or read: the sum cannot overflow.
        let v = match self.prev {
            None => gap,
            Some(p) => p.saturating_add(gap),
        };
        self.prev = Some(v);
        self.read += 1;
        Some(v)
    }
}

/// Why bytes are not a valid list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListError {
    /// Lengths that cannot hold the entries announced, or do not add up.
    Truncated,
    /// Keys not strictly increasing.
    KeyOrder,
}

/// One list being built, already in its compressed form: the gaps as
/// varints, one or two bytes each for most lists instead of the four of a
/// plain `u32` (a build of millions of passages holds every list at once).
#[derive(Debug, Default)]
pub(crate) struct GrowingList {
    bytes: Vec<u8>,
    count: u32,
    last: u32,
}

impl GrowingList {
    /// Appends `v`, which must be greater than every value before it.
    pub(crate) fn push(&mut self, v: u32) {
        let gap = if self.count == 0 { v } else { v - self.last };
        put_var(&mut self.bytes, u64::from(gap));
        self.last = v;
        self.count += 1;
    }

    /// The values, decoded, each with where its bytes end.
    fn values(&self) -> impl Iterator<Item = (u32, usize)> + '_ {
        let mut at = 0usize;
        let mut v = 0u32;
        (0..self.count).map(move |i| {
            let gap = get_var(&self.bytes, &mut at).expect("bytes this list wrote");
            v = if i == 0 { gap } else { v + gap };
            (v, at)
        })
    }

    /// The bitmap of the list when it is stored as one.
    fn bitmap(&self) -> Option<Vec<u8>> {
        wants_bitmap(self.count, self.last)
            .then(|| bitmap_of(self.values().map(|(v, _)| v), self.last))
    }

    /// The skip entries of the list (none for one of at most [`BLOCK`]
    /// entries), as [`PostingLists::from_lists`] writes them.
    fn skips(&self) -> Vec<u8> {
        let mut skips = Vec::new();
        if self.count as usize <= BLOCK {
            return skips;
        }
        for (i, (v, at)) in self.values().enumerate() {
            if (i + 1) % BLOCK == 0 || i + 1 == self.count as usize {
                skips.extend_from_slice(&v.to_le_bytes());
                skips.extend_from_slice(&(at as u32).to_le_bytes());
            }
        }
        skips
    }
}

impl PostingLists {
    /// From lists built in compressed form: the same lists as
    /// [`PostingLists::from_lists`] of their values makes, each list's
    /// bytes freed as soon as they are copied.
    pub(crate) fn from_growing(lists: FxHashMap<u64, GrowingList>) -> Self {
        let mut lists: Vec<(u64, GrowingList)> = lists.into_iter().collect();
        lists.sort_unstable_by_key(|(k, _)| *k);
        let total: usize = lists.iter().map(|(_, l)| l.bytes.len()).sum();
        let mut out = PostingLists {
            keys: Vec::with_capacity(lists.len()),
            counts: Vec::with_capacity(lists.len()),
            ends: Vec::with_capacity(lists.len()),
            data: Blob::Owned(Vec::with_capacity(total)),
            skip_starts: Vec::with_capacity(lists.len()),
            skips: Blob::default(),
        };
        for (k, list) in lists {
            let pushed = match list.bitmap() {
                Some(bits) => out.push_raw(k, list.count, &bits, &[]),
                None => out.push_raw(k, list.count, &list.bytes, &list.skips()),
            };
            pushed.expect("keys of a map are distinct and sorted");
        }
        if let Blob::Owned(v) = &mut out.skips {
            v.shrink_to_fit();
        }
        out
    }

    /// From plain lists (each strictly increasing): the reference that
    /// [`PostingLists::from_growing`] is checked against.
    #[cfg(test)]
    pub(crate) fn from_lists(mut lists: Vec<(u64, Vec<u32>)>) -> Self {
        lists.sort_unstable_by_key(|(k, _)| *k);
        let mut out = PostingLists {
            keys: Vec::with_capacity(lists.len()),
            counts: Vec::with_capacity(lists.len()),
            ends: Vec::with_capacity(lists.len()),
            data: Blob::default(),
            skip_starts: Vec::with_capacity(lists.len()),
            skips: Blob::default(),
        };
        let mut bytes = Vec::new();
        let mut skips = Vec::new();
        for (k, list) in lists {
            bytes.clear();
            skips.clear();
            if let Some(&last) = list.last().filter(|l| wants_bitmap(list.len() as u32, **l)) {
                let bits = bitmap_of(list.iter().copied(), last);
                out.push_raw(k, list.len() as u32, &bits, &[])
                    .expect("keys of a map are distinct and sorted");
                continue;
            }
            let mut prev = 0u32;
            for (i, &v) in list.iter().enumerate() {
                put_var(&mut bytes, u64::from(if i == 0 { v } else { v - prev }));
                prev = v;
                let block_end = (i + 1) % BLOCK == 0 || i + 1 == list.len();
                if list.len() > BLOCK && block_end {
                    skips.extend_from_slice(&v.to_le_bytes());
                    skips.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
                }
            }
            out.push_raw(k, list.len() as u32, &bytes, &skips)
                .expect("keys of a map are distinct and sorted");
        }
        for blob in [&mut out.data, &mut out.skips] {
            if let Blob::Owned(v) = blob {
                v.shrink_to_fit();
            }
        }
        out
    }

    /// Lists whose bytes are read in place: `keys` strictly increasing,
    /// with each list's entry count and byte length, their bytes one after
    /// another in `data`. Only the shape of the table is checked here, not
    /// the lists' bytes (that would read every page of them); a reader
    /// stops at a truncated varint, and readers of an n-gram index drop
    /// ordinals past its passages, so damaged bytes cannot index out of
    /// bounds.
    pub(crate) fn from_table(
        keys: Vec<u64>,
        counts: Vec<u32>,
        lengths: &[usize],
        data: Blob,
        skips: Blob,
    ) -> Result<Self, ListError> {
        if keys.windows(2).any(|w| w[0] >= w[1]) {
            return Err(ListError::KeyOrder);
        }
        if keys.len() != counts.len() || keys.len() != lengths.len() {
            return Err(ListError::Truncated);
        }
        let mut ends = Vec::with_capacity(lengths.len());
        let mut end = 0usize;
        for (&len, &count) in lengths.iter().zip(&counts) {
            // A varint of a u32 takes one to five bytes; a bitmap (fewer
            // bytes than values) holds at most eight values a byte.
            let holds = if is_bitmap(count, len) {
                count as usize <= len.saturating_mul(8)
            } else {
                len <= 5 * count as usize
            };
            if !holds {
                return Err(ListError::Truncated);
            }
            end = end.checked_add(len).ok_or(ListError::Truncated)?;
            ends.push(end);
        }
        if end != data.len() {
            return Err(ListError::Truncated);
        }
        let mut skip_starts = Vec::with_capacity(counts.len());
        let mut skip_end = 0usize;
        for (&count, &len) in counts.iter().zip(lengths) {
            skip_starts.push(skip_end);
            skip_end += skip_len(count, len);
        }
        if skip_end != skips.len() {
            return Err(ListError::Truncated);
        }
        Ok(PostingLists {
            keys,
            counts,
            ends,
            data,
            skip_starts,
            skips,
        })
    }

    fn push_raw(
        &mut self,
        key: u64,
        count: u32,
        bytes: &[u8],
        skips: &[u8],
    ) -> Result<(), ListError> {
        if self.keys.last().is_some_and(|last| *last >= key) {
            return Err(ListError::KeyOrder);
        }
        for blob in [&mut self.data, &mut self.skips] {
            if let Blob::Shared { .. } = blob {
                *blob = Blob::Owned(blob.to_vec());
            }
        }
        let (Blob::Owned(data), Blob::Owned(all_skips)) = (&mut self.data, &mut self.skips) else {
            unreachable!("copied above")
        };
        self.keys.push(key);
        self.counts.push(count);
        data.extend_from_slice(bytes);
        self.ends.push(data.len());
        self.skip_starts.push(all_skips.len());
        all_skips.extend_from_slice(skips);
        Ok(())
    }

    /// The number of keys.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    fn list(&self, i: usize) -> List<'_> {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        let skip = self.skip_starts[i];
        let len = self.ends[i] - start;
        List {
            count: self.counts[i],
            bytes: &self.data[start..self.ends[i]],
            skips: &self.skips[skip..skip + skip_len(self.counts[i], len)],
        }
    }

    /// Every list's skip entries, one after another (for encoding).
    pub(crate) fn skip_bytes(&self) -> &[u8] {
        &self.skips
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
            + self.skip_starts.capacity() * size_of::<usize>()
            + self.data.heap_bytes()
            + self.skips.heap_bytes()
    }

    /// Bytes of lists read in place from shared bytes.
    pub(crate) fn shared_bytes(&self) -> usize {
        self.data.shared_bytes() + self.skips.shared_bytes()
    }
}

/// The values of `small` (sorted) that are also in `list`.
pub(crate) fn intersect(small: &[u32], list: List<'_>) -> Vec<u32> {
    let mut out = Vec::with_capacity(small.len().min(list.len()));
    let mut it = list.iter();
    for &s in small {
        match it.seek(s) {
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
            raw in proptest::collection::btree_map(any::<u64>(), proptest::collection::btree_set(0u32..3000, 0..700), 0..12),
            probe in proptest::collection::btree_set(0u32..3100, 0..200),
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
            // Re-reading the encoded lists from their table and bytes gives
            // the same value.
            let (mut keys, mut counts, mut lengths, mut data) = (vec![], vec![], vec![], vec![]);
            let skips = p.skip_bytes().to_vec();
            for (k, n, bytes) in p.iter() {
                keys.push(k);
                counts.push(n);
                lengths.push(bytes.len());
                data.extend_from_slice(bytes);
            }
            let again = PostingLists::from_table(keys, counts, &lengths, Blob::Owned(data), Blob::Owned(skips)).unwrap();
            prop_assert_eq!(&again, &p);
            // Lists built compressed as they grow are the same lists, byte
            // for byte, skip entries included.
            let mut growing: FxHashMap<u64, GrowingList> = FxHashMap::default();
            for (k, list) in &lists {
                let g = growing.entry(*k).or_default();
                list.iter().for_each(|v| g.push(*v));
            }
            prop_assert_eq!(PostingLists::from_growing(growing), p);
        }
    }

    #[test]
    fn dense_lists_are_bitmaps_no_larger_than_their_varints() {
        let dense: Vec<u32> = (0..1000).filter(|v| v % 3 != 1).collect();
        let sparse: Vec<u32> = (0..1000).map(|v| v * 9).collect();
        let p = PostingLists::from_lists(vec![(1, dense.clone()), (2, sparse.clone())]);
        let sizes: Vec<(u32, usize)> = p.iter().map(|(_, n, b)| (n, b.len())).collect();
        // 667 values up to 998 in 125 bytes; 1,000 sparse ones as varints
        // (one or two bytes each), with their eight skip entries.
        assert_eq!(sizes[0], (667, 125));
        assert!(sizes[1].1 >= 1000);
        assert_eq!(p.skip_bytes().len(), 8 * 8);
        let mut it = p.get(1).unwrap().iter();
        assert_eq!(it.seek(1), Some(2));
        assert_eq!(it.seek(2), Some(2));
        assert_eq!(it.next(), Some(3));
        assert_eq!(it.seek(997), Some(998));
        assert_eq!(it.seek(999), Some(999));
        assert_eq!(it.seek(1000), None);
        assert_eq!(p.get(1).unwrap().iter().collect::<Vec<_>>(), dense);
        assert_eq!(p.get(2).unwrap().iter().collect::<Vec<_>>(), sparse);
    }

    #[test]
    fn malformed_tables_are_refused_and_damaged_bytes_read_safely() {
        let table = |keys: Vec<u64>, counts: Vec<u32>, lengths: &[usize], data: &[u8]| {
            PostingLists::from_table(
                keys,
                counts,
                lengths,
                Blob::Owned(data.to_vec()),
                Blob::default(),
            )
        };
        assert!(table(vec![5, 6], vec![2, 0], &[2, 0], &[1, 2]).is_ok());
        assert_eq!(
            table(vec![6, 5], vec![1, 1], &[1, 1], &[1, 1]),
            Err(ListError::KeyOrder)
        );
        assert_eq!(
            table(vec![5, 5], vec![1, 1], &[1, 1], &[1, 1]),
            Err(ListError::KeyOrder)
        );
        // More entries than a bitmap of the bytes holds, more than five bytes per entry, lengths that
        // do not add up to the bytes, tables of unequal sizes.
        assert_eq!(
            table(vec![1], vec![9], &[1], &[1]),
            Err(ListError::Truncated),
            "a bitmap byte holds at most eight values"
        );
        assert_eq!(
            table(vec![1], vec![1], &[6], &[0x80; 6]),
            Err(ListError::Truncated)
        );
        assert_eq!(
            table(vec![1], vec![1], &[1], &[1, 2]),
            Err(ListError::Truncated)
        );
        assert_eq!(
            table(vec![1], vec![1, 2], &[1], &[1]),
            Err(ListError::Truncated)
        );
        assert_eq!(
            table(vec![1], vec![1], &[usize::MAX], &[1]),
            Err(ListError::Truncated)
        );
        // Bytes that are not the varints announced (a crafted file) are
        // read without a panic: a truncated varint ends the list.
        let p = table(vec![1, 2], vec![2, 1], &[2, 1], &[0x85, 0x80, 0x81]).unwrap();
        assert_eq!(p.get(1).unwrap().iter().count(), 0);
        assert_eq!(p.get(2).unwrap().iter().count(), 0);
        assert_eq!(intersect(&[1, 2, 3], p.get(1).unwrap()), Vec::<u32>::new());
        // Damaged skip entries make a seek jump wrongly, never out of
        // bounds or backwards.
        let long: Vec<u32> = (0..400).map(|v| v * 30).collect();
        let p = PostingLists::from_lists(vec![(7, long.clone())]);
        let (k, n, bytes) = p.iter().next().unwrap();
        let mut skips = p.skip_bytes().to_vec();
        assert_eq!(skips.len(), 4 * 8);
        assert_eq!(
            intersect(&[30, 6000, 11970], p.get(7).unwrap()),
            [30, 6000, 11970]
        );
        for i in 0..skips.len() {
            for v in [0u8, 0x80, 0xff] {
                let keep = skips[i];
                skips[i] = v;
                let q = PostingLists::from_table(
                    vec![k],
                    vec![n],
                    &[bytes.len()],
                    Blob::Owned(bytes.to_vec()),
                    Blob::Owned(skips.clone()),
                )
                .unwrap();
                let got = intersect(&[30, 6000, 11970, 50000], q.get(7).unwrap());
                assert!(got.iter().all(|v| [30, 6000, 11970].contains(v)), "{got:?}");
                skips[i] = keep;
            }
        }
        // A bitmap's announced count is not checked against its bits (that
        // would read every page): its reader yields the bits that are set.
        let p = table(vec![3], vec![5], &[2], &[0b1000_0001, 0]).unwrap();
        assert_eq!(p.get(3).unwrap().iter().collect::<Vec<_>>(), [0, 7]);
        assert_eq!(intersect(&[0, 1, 7, 8, 15, 16], p.get(3).unwrap()), [0, 7]);
        assert_eq!(p.get(3).unwrap().iter().seek(u32::MAX), None);
        assert_eq!(
            get_var(&[0xff, 0xff, 0xff, 0xff, 0x7f], &mut 0),
            None,
            "over 32 bits"
        );
    }
}
