//! A bounds-checked little-endian cursor over the model bytes.

use crate::E5Error;

/// Reads little-endian values from a byte slice, reporting truncation as
/// [`E5Error::Truncated`] with the offset of the failed read.
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8], pos: usize) -> Self {
        Self { data, pos }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Takes the next `n` bytes.
    pub(crate) fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], E5Error> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.data.len());
        match end {
            Some(end) => {
                let out = &self.data[self.pos..end];
                self.pos = end;
                Ok(out)
            }
            None => Err(E5Error::Truncated {
                what,
                offset: self.pos,
                needed: n,
                len: self.data.len(),
            }),
        }
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], E5Error> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N, what)?);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, E5Error> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, E5Error> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, E5Error> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn i32(&mut self, what: &'static str) -> Result<i32, E5Error> {
        Ok(i32::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, E5Error> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn f32(&mut self, what: &'static str) -> Result<f32, E5Error> {
        Ok(f32::from_le_bytes(self.array(what)?))
    }
}

/// Decodes `n` little-endian `f32` values from `bytes` (length `4 * n`).
pub(crate) fn f32_vec(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Decodes little-endian `u32` values from `bytes` (length a multiple of 4).
pub(crate) fn u32_vec(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}
