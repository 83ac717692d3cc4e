//! Where a [`crate::FlatIndex`] keeps its matrix: in its own heap buffer, or
//! in bytes the caller shares with it, such as a memory-mapped index file.
//!
//! Shared rows are read in place, so a process that opens a large index
//! keeps only the pages it touches resident (the rows of the candidates it
//! rescores) instead of a copy of every full-precision vector. They are
//! read-only: the first change to an index over shared rows copies them
//! into its own buffer.
//!
//! This crate does no I/O: what the bytes are backed by is the caller's
//! business. They must not change while an index refers to them.

use std::fmt;
use std::sync::Arc;

/// Bytes an index may refer to for as long as it lives.
pub type SharedBytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// The row-major matrix of a flat index.
#[derive(Clone)]
pub(crate) enum Rows {
    /// The index's own buffer.
    Owned(Vec<f32>),
    /// `len` little-endian `f32` at byte `start` of shared bytes. Only
    /// built by [`Rows::shared`], which checks bounds and alignment once.
    Shared {
        bytes: SharedBytes,
        start: usize,
        len: usize,
    },
}

impl Rows {
    /// Rows read in place from `bytes[start..start + 4 * len]`, when this
    /// target can: a little-endian CPU and 4-byte aligned data. `None` when
    /// not (the caller copies instead) or when the range is out of bounds.
    pub(crate) fn shared(bytes: SharedBytes, start: usize, len: usize) -> Option<Self> {
        if cfg!(target_endian = "big") {
            return None;
        }
        let end = start.checked_add(len.checked_mul(4)?)?;
        let raw = (*bytes).as_ref().get(start..end)?;
        bytemuck::try_cast_slice::<u8, f32>(raw).ok()?;
        Some(Rows::Shared { bytes, start, len })
    }

    /// The matrix as one slice.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[f32] {
        match self {
            Rows::Owned(v) => v,
            // Bounds and alignment were checked in `shared`, and the bytes
            // do not move or change while shared.
            Rows::Shared { bytes, start, len } => {
                bytemuck::cast_slice(&(**bytes).as_ref()[*start..*start + *len * 4])
            }
        }
    }

    /// The index's own buffer, copied out of shared bytes first if need be.
    pub(crate) fn to_mut(&mut self) -> &mut Vec<f32> {
        if let Rows::Shared { .. } = self {
            *self = Rows::Owned(self.as_slice().to_vec());
        }
        match self {
            Rows::Owned(v) => v,
            Rows::Shared { .. } => unreachable!("copied above"),
        }
    }

    /// Whether the rows are read in place from shared bytes.
    pub(crate) fn is_shared(&self) -> bool {
        matches!(self, Rows::Shared { .. })
    }

    /// Bytes of the index's own heap buffer (0 for shared rows).
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Rows::Owned(v) => v.capacity() * 4,
            Rows::Shared { .. } => 0,
        }
    }

    pub(crate) fn shrink_to_fit(&mut self) {
        if let Rows::Owned(v) = self {
            v.shrink_to_fit();
        }
    }
}

impl fmt::Debug for Rows {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rows::Owned(v) => f.debug_struct("Owned").field("floats", &v.len()).finish(),
            Rows::Shared { start, len, .. } => f
                .debug_struct("Shared")
                .field("start", start)
                .field("floats", len)
                .finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes with 4-byte alignment: `u32` words.
    struct AlignedBytes(Vec<u32>);

    impl AsRef<[u8]> for AlignedBytes {
        fn as_ref(&self) -> &[u8] {
            bytemuck::cast_slice(&self.0)
        }
    }

    fn floats(values: &[f32]) -> SharedBytes {
        Arc::new(AlignedBytes(values.iter().map(|v| v.to_bits()).collect()))
    }

    #[test]
    fn shared_rows_read_in_place_and_copy_on_write() {
        let values = [1.0f32, -2.5, 3.25, 0.0];
        let mut rows = Rows::shared(floats(&values), 0, 4).expect("aligned");
        assert!(rows.is_shared());
        assert_eq!(rows.as_slice(), &values);
        assert_eq!(rows.heap_bytes(), 0);
        let tail = Rows::shared(floats(&values), 8, 2).expect("aligned");
        assert_eq!(tail.as_slice(), &[3.25, 0.0]);
        rows.to_mut().push(9.0);
        assert!(!rows.is_shared());
        assert_eq!(rows.as_slice(), &[1.0, -2.5, 3.25, 0.0, 9.0]);
        assert!(rows.heap_bytes() >= 20);
    }

    #[test]
    fn out_of_bounds_and_misaligned_ranges_are_refused() {
        let bytes = floats(&[0.0; 8]);
        assert!(Rows::shared(bytes.clone(), 0, 8).is_some());
        assert!(Rows::shared(bytes.clone(), 0, 9).is_none());
        assert!(Rows::shared(bytes.clone(), 4, 8).is_none());
        assert!(Rows::shared(bytes.clone(), usize::MAX, 1).is_none());
        assert!(Rows::shared(bytes.clone(), 0, usize::MAX).is_none());
        assert!(Rows::shared(bytes.clone(), 1, 2).is_none());
        assert!(Rows::shared(bytes.clone(), 2, 2).is_none());
        assert!(Rows::shared(bytes, 4, 2).is_some());
    }
}
