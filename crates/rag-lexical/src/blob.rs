//! The bulk bytes of a segment (compressed term postings, n-gram lists and
//! match texts): held in the segment's own buffers after a build, or read
//! in place from bytes the caller shares, such as a memory-mapped index
//! file, so a process opening a large index keeps resident only the pages
//! its queries touch.
//!
//! This crate does no I/O: what shared bytes are backed by is the caller's
//! business. They must not change while a segment refers to them.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// Bytes a segment may refer to for as long as it lives.
pub type SharedBytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// A segment's buffer of bytes.
#[derive(Clone)]
pub(crate) enum Blob {
    Owned(Vec<u8>),
    /// `bytes[start..start + len]`, checked when made ([`Blob::shared`]).
    Shared {
        bytes: SharedBytes,
        start: usize,
        len: usize,
    },
}

impl Default for Blob {
    fn default() -> Self {
        Blob::Owned(Vec::new())
    }
}

impl Blob {
    /// `bytes[start..start + len]`, if in bounds.
    pub(crate) fn shared(bytes: &SharedBytes, start: usize, len: usize) -> Option<Self> {
        let end = start.checked_add(len)?;
        (end <= (**bytes).as_ref().len()).then(|| Blob::Shared {
            bytes: bytes.clone(),
            start,
            len,
        })
    }

    /// Whether the bytes are read in place from shared bytes.
    pub(crate) fn is_shared(&self) -> bool {
        matches!(self, Blob::Shared { .. })
    }

    /// Bytes of the segment's own heap buffer (0 when shared).
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Blob::Owned(v) => v.capacity(),
            Blob::Shared { .. } => 0,
        }
    }

    /// Bytes read in place from shared bytes (0 when owned).
    pub(crate) fn shared_bytes(&self) -> usize {
        match self {
            Blob::Owned(_) => 0,
            Blob::Shared { len, .. } => *len,
        }
    }
}

impl Deref for Blob {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            Blob::Owned(v) => v,
            Blob::Shared { bytes, start, len } => &(**bytes).as_ref()[*start..*start + *len],
        }
    }
}

impl PartialEq for Blob {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Blob {}

impl fmt::Debug for Blob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.is_shared() { "Shared" } else { "Owned" };
        f.debug_struct(kind).field("len", &self.len()).finish()
    }
}

/// The match texts of a segment's passages, one after another in one blob.
#[derive(Debug, Default, Clone)]
pub(crate) struct Texts {
    /// End of each text in `data` (its start is the previous text's end).
    ends: Vec<usize>,
    data: Blob,
}

impl Texts {
    /// Texts of the given byte lengths, in order, in `data`; `None` when
    /// they do not add up to its length.
    pub(crate) fn from_lengths(lengths: &[usize], data: Blob) -> Option<Self> {
        let mut ends = Vec::with_capacity(lengths.len());
        let mut end = 0usize;
        for &len in lengths {
            end = end.checked_add(len)?;
            ends.push(end);
        }
        (end == data.len()).then_some(Texts { ends, data })
    }

    /// Appends a text (copying shared texts into an own buffer first).
    pub(crate) fn push(&mut self, text: &str) {
        if let Blob::Shared { .. } = self.data {
            self.data = Blob::Owned(self.data.to_vec());
        }
        if let Blob::Owned(v) = &mut self.data {
            v.extend_from_slice(text.as_bytes());
            self.ends.push(v.len());
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Text `i`. Texts are written from `&str`s, and shared ones were
    /// covered by their file's checksum; bytes that are not UTF-8 anyway
    /// (a crafted file) read as an empty text rather than a panic.
    pub(crate) fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        self.data
            .get(start..self.ends[i])
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or("")
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// The byte length of each text.
    pub(crate) fn lengths(&self) -> impl Iterator<Item = usize> + '_ {
        self.ends.iter().scan(0usize, |prev, &end| {
            Some(end - std::mem::replace(prev, end))
        })
    }

    /// All texts' bytes, concatenated.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.data
    }

    pub(crate) fn shrink_to_fit(&mut self) {
        self.ends.shrink_to_fit();
        if let Blob::Owned(v) = &mut self.data {
            v.shrink_to_fit();
        }
    }

    /// Estimated heap bytes (the offsets, and the texts when not shared).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.ends.capacity() * std::mem::size_of::<usize>() + self.data.heap_bytes()
    }

    pub(crate) fn shared_bytes(&self) -> usize {
        self.data.shared_bytes()
    }
}

impl PartialEq for Texts {
    fn eq(&self, other: &Self) -> bool {
        self.ends == other.ends && self.data == other.data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_push_get_and_share() {
        let mut t = Texts::default();
        for s in ["怎么退款", "", "refund policy"] {
            t.push(s);
        }
        assert_eq!(
            t.iter().collect::<Vec<_>>(),
            ["怎么退款", "", "refund policy"]
        );
        assert_eq!(t.lengths().collect::<Vec<_>>(), [12, 0, 13]);
        let mut file = b"header".to_vec();
        file.extend_from_slice(t.bytes());
        file.extend_from_slice(b"trailer");
        let shared: SharedBytes = Arc::new(file);
        let lengths: Vec<usize> = t.lengths().collect();
        let blob = Blob::shared(&shared, 6, 25).unwrap();
        let mut s = Texts::from_lengths(&lengths, blob).unwrap();
        assert_eq!(s, t);
        assert_eq!(s.heap_bytes(), 3 * std::mem::size_of::<usize>());
        assert_eq!(s.shared_bytes(), 25);
        // Lengths that do not add up, and ranges out of bounds, are refused.
        assert!(Texts::from_lengths(&[12, 0, 12], Blob::shared(&shared, 6, 25).unwrap()).is_none());
        assert!(Blob::shared(&shared, 30, 10).is_none());
        assert!(Blob::shared(&shared, usize::MAX, 2).is_none());
        // A push copies the shared texts first.
        s.push("新的");
        assert_eq!(s.shared_bytes(), 0);
        assert_eq!(s.get(3), "新的");
        assert_eq!(s.get(0), "怎么退款");
        // Bytes that are not UTF-8 read as an empty text.
        let bad: SharedBytes = Arc::new(vec![0xffu8, 0xfe]);
        let bad = Texts::from_lengths(&[2], Blob::shared(&bad, 0, 2).unwrap()).unwrap();
        assert_eq!(bad.get(0), "");
    }
}
