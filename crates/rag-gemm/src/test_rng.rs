//! A tiny deterministic generator for the kernels' tests (no dependency).

/// A 64-bit LCG; the high bits are the output.
pub(crate) struct Lcg(pub u64);

impl Lcg {
    pub(crate) fn next_u32(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as u32
    }

    /// Uniform in [-1, 1).
    pub(crate) fn uniform(&mut self) -> f32 {
        self.next_u32() as f32 / (1u64 << 31) as f32 * 2.0 - 1.0
    }
}
