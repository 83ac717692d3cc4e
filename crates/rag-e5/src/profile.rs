//! Per-operation timing of the forward pass, for finding where the time
//! goes.
//!
//! Compiled in only with the crate's `profile` feature; without it the
//! timer around each operation is the plain call, [`reset`] does nothing and [`snapshot`]
//! returns an empty list, so the default build pays nothing. With the
//! feature every operation of [`crate::E5Model::embed_many`]'s forward
//! passes adds its wall-clock time to a process-wide counter (summed over
//! threads, so with several threads the figures are CPU seconds).

/// The operations of the forward pass that are timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)] // Only read with the `profile` feature.
pub(crate) enum Op {
    /// Word-embedding lookup, position and type embeddings.
    Embed,
    /// Quantising activations for the matrix products.
    Quantize,
    /// The matrix products of the linear layers.
    Matmul,
    /// Adding the two parts of the int8 tiers' products.
    Combine,
    /// Attention scores, softmax and the weighted values.
    Attention,
    /// Residual additions and layer normalisation.
    LayerNorm,
    /// GELU.
    Gelu,
    /// The whole forward pass (the rest, `other` in [`snapshot`], is this
    /// minus the operations above: buffers, mean pooling).
    Forward,
}

/// Every timed operation and its name in [`snapshot`].
#[allow(dead_code)] // Only read with the `profile` feature.
const OPS: [(Op, &str); 8] = [
    (Op::Embed, "embed"),
    (Op::Quantize, "quantize"),
    (Op::Matmul, "matmul"),
    (Op::Combine, "combine"),
    (Op::Attention, "attention"),
    (Op::LayerNorm, "layer_norm"),
    (Op::Gelu, "gelu"),
    (Op::Forward, "forward"),
];

#[cfg(feature = "profile")]
mod counters {
    use std::sync::atomic::{AtomicU64, Ordering};

    static NANOS: [AtomicU64; super::OPS.len()] = [const { AtomicU64::new(0) }; super::OPS.len()];

    pub(super) fn add(op: super::Op, nanos: u64) {
        NANOS[op as usize].fetch_add(nanos, Ordering::Relaxed);
    }

    pub(super) fn reset() {
        for n in &NANOS {
            n.store(0, Ordering::Relaxed);
        }
    }

    pub(super) fn get(op: super::Op) -> u64 {
        NANOS[op as usize].load(Ordering::Relaxed)
    }
}

/// Runs `f`, adding its duration to `op`'s counter when profiling is
/// compiled in.
#[inline(always)]
pub(crate) fn timed<R>(op: Op, f: impl FnOnce() -> R) -> R {
    #[cfg(feature = "profile")]
    {
        let start = std::time::Instant::now();
        let r = f();
        counters::add(op, start.elapsed().as_nanos() as u64);
        r
    }
    #[cfg(not(feature = "profile"))]
    {
        let _ = op;
        f()
    }
}

/// Times a whole forward pass ([`Op::Forward`]).
pub(crate) struct Stopwatch {
    #[cfg(feature = "profile")]
    start: std::time::Instant,
}

impl Stopwatch {
    #[inline(always)]
    pub(crate) fn start() -> Self {
        Self {
            #[cfg(feature = "profile")]
            start: std::time::Instant::now(),
        }
    }

    /// Adds the elapsed time to [`Op::Forward`].
    #[inline(always)]
    pub(crate) fn stop(self) {
        #[cfg(feature = "profile")]
        counters::add(Op::Forward, self.start.elapsed().as_nanos() as u64);
    }
}

/// Whether the crate was built with the `profile` feature.
pub fn enabled() -> bool {
    cfg!(feature = "profile")
}

/// Sets every counter to zero.
pub fn reset() {
    #[cfg(feature = "profile")]
    counters::reset();
}

/// Seconds spent per operation since the last [`reset`], as
/// `(name, seconds)` in a fixed order (`embed`, `quantize`, `matmul`,
/// `combine`, `attention`, `layer_norm`, `gelu`, then `other`, the rest of
/// the forward passes, and `forward`, their total); empty without the
/// `profile` feature.
pub fn snapshot() -> Vec<(&'static str, f64)> {
    #[cfg(feature = "profile")]
    {
        let secs = |op| counters::get(op) as f64 * 1e-9;
        let mut out: Vec<(&'static str, f64)> = OPS
            .iter()
            .filter(|(op, _)| *op != Op::Forward)
            .map(|&(op, name)| (name, secs(op)))
            .collect();
        let parts: f64 = out.iter().map(|(_, s)| s).sum();
        let total = secs(Op::Forward);
        out.push(("other", (total - parts).max(0.0)));
        out.push(("forward", total));
        out
    }
    #[cfg(not(feature = "profile"))]
    {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timed_returns_the_value_and_counts_only_when_enabled() {
        assert_eq!(timed(Op::Gelu, || 41 + 1), 42);
        let snap = snapshot();
        if enabled() {
            assert_eq!(snap.len(), OPS.len() + 1);
            assert!(snap.iter().all(|&(_, s)| s >= 0.0));
        } else {
            assert!(snap.is_empty());
        }
    }
}
