//! The numeric precision of the encoder's linear layers.

use std::fmt;
use std::str::FromStr;

pub use rag_gemm::{Bf16Tier, Int8Tier};

/// How the linear layers (query, key, value, attention output and the two
/// feed-forward products: nearly all of the arithmetic) compute.
///
/// - [`Precision::F32`]: the weights as the file has them, in f32 (the
///   default; sentence-transformers' numerics).
/// - [`Precision::Int8`]: the query, key and value, attention output and
///   feed-forward input products with weights quantised to int8 per output
///   channel at load (after a column smoothing, see `linear.rs`) and
///   activations per token in two 8-bit parts (the value and its rounding
///   error, about 15 bits together), exact integer sums, on AMX, AVX-512
///   VNNI or a portable kernel ([`Int8Tier`]); the feed-forward output
///   product in bf16, because its weights do not survive int8 per channel
///   (all-MiniLM-L6-v2: minimum cosine 0.99885 with it in int8, 0.99916
///   with it in bf16; single-part activations: 0.984).
/// - [`Precision::Bf16`]: weights and activations rounded to bfloat16,
///   products summed in f32; on AVX-512 BF16 or a portable kernel
///   ([`Bf16Tier`]). The closest to f32 (minimum cosine 0.99994).
///
/// Attention, layer norms, activations and pooling stay f32 in every
/// precision. The packed weights replace the f32 ones (int8: about a third
/// of the memory, bf16: half).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// f32 weights and activations.
    #[default]
    F32,
    /// int8 weights per channel, activations per token.
    Int8,
    /// bf16 weights and activations, f32 sums.
    Bf16,
}

impl Precision {
    /// Every precision.
    pub const ALL: [Precision; 3] = [Precision::F32, Precision::Int8, Precision::Bf16];

    /// The setting's spelling: `"f32"`, `"int8"` or `"bf16"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Int8 => "int8",
            Precision::Bf16 => "bf16",
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of [`Precision::from_str`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown BERT precision {0:?} (expected f32, int8 or bf16)")]
pub struct ParsePrecisionError(pub String);

impl FromStr for Precision {
    type Err = ParsePrecisionError;

    /// Parses the setting's spelling (ASCII case-insensitive, surrounding
    /// whitespace ignored).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        Self::ALL
            .into_iter()
            .find(|p| t.eq_ignore_ascii_case(p.as_str()))
            .ok_or_else(|| ParsePrecisionError(s.to_owned()))
    }
}

/// The kernels the packed precisions run on: the fastest this CPU has by
/// default ([`Tiers::best`]); a lower tier can be forced, which is how
/// every tier is tested on one machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tiers {
    /// The int8 kernel.
    pub int8: Int8Tier,
    /// The bf16 kernel.
    pub bf16: Bf16Tier,
}

impl Tiers {
    /// The fastest supported tiers.
    pub fn best() -> Self {
        Tiers {
            int8: Int8Tier::best(),
            bf16: Bf16Tier::best(),
        }
    }

    /// The portable kernels (any CPU).
    pub fn portable() -> Self {
        Tiers {
            int8: Int8Tier::Portable,
            bf16: Bf16Tier::Portable,
        }
    }

    /// Whether this CPU runs both tiers.
    pub fn is_supported(self) -> bool {
        self.int8.is_supported() && self.bf16.is_supported()
    }
}

impl Default for Tiers {
    fn default() -> Self {
        Self::best()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in Precision::ALL {
            assert_eq!(p.as_str().parse::<Precision>(), Ok(p));
            assert_eq!(p.to_string(), p.as_str());
        }
        assert_eq!(" INT8 ".parse::<Precision>(), Ok(Precision::Int8));
        assert!("fp16".parse::<Precision>().is_err());
        assert!(Tiers::best().is_supported() && Tiers::portable().is_supported());
    }
}
