//! The matrix-kernel tiers and their run-time selection.

use std::fmt;
use std::str::FromStr;

/// Which matrix kernel runs the encoder's linear layers.
///
/// The tiers, fastest first:
///
/// - [`Kernel::Amx`]: int8 tiles (`tdpbusd`) on Intel AMX (Sapphire Rapids
///   and newer), with the epilogue in AVX-512.
/// - [`Kernel::Avx512`]: the file's 4-bit blocks times 8-bit activations
///   (the reference engine's numerics) with `vpdpbusd` on AVX-512 VNNI
///   (Intel Ice Lake and newer, AMD Zen 4 and newer), and bf16 attention
///   where the CPU has AVX-512 BF16.
/// - [`Kernel::Avx2`]: the same numerics on AVX2 and FMA.
/// - [`Kernel::Portable`]: the same numerics in safe Rust for LLVM's
///   auto-vectoriser, on any CPU.
///
/// The AMX tier repacks the weights at load, re-quantised to int8 per
/// output channel, and quantises activations per token; the three others
/// keep the file's Q4_0 blocks and quantise activations per 32-value block,
/// exactly as the reference engine does. [`Kernel::Auto`] picks the fastest
/// tier this CPU (and, for AMX, the operating system) supports; naming a
/// tier forces it, which is how a lower tier is tested or compared on a
/// machine that has a higher one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Kernel {
    /// The fastest tier available (the default).
    #[default]
    Auto,
    /// AMX-INT8 tiles.
    Amx,
    /// AVX-512 VNNI.
    Avx512,
    /// AVX2 and FMA (4-bit weights).
    Avx2,
    /// Portable safe Rust (4-bit weights).
    Portable,
}

impl Kernel {
    /// Every concrete tier, fastest first (without [`Kernel::Auto`]).
    pub const TIERS: [Kernel; 4] = [Kernel::Amx, Kernel::Avx512, Kernel::Avx2, Kernel::Portable];

    /// The setting's spelling: `"auto"`, `"amx"`, `"avx512"`, `"avx2"` or
    /// `"portable"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kernel::Auto => "auto",
            Kernel::Amx => "amx",
            Kernel::Avx512 => "avx512",
            Kernel::Avx2 => "avx2",
            Kernel::Portable => "portable",
        }
    }

    /// Whether this CPU (and operating system) can run the tier.
    /// [`Kernel::Auto`] and [`Kernel::Portable`] always can. The first call
    /// for [`Kernel::Amx`] asks Linux for permission to use the tile data
    /// registers (`arch_prctl(ARCH_REQ_XCOMP_PERM)`); the answer is cached.
    pub fn is_supported(self) -> bool {
        match self {
            Kernel::Auto | Kernel::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Kernel::Amx => rag_gemm::int8::has_amx(),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => rag_gemm::int8::has_avx512_vnni(),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => crate::kernels::has_avx2_fma(),
            #[cfg(not(target_arch = "x86_64"))]
            Kernel::Amx | Kernel::Avx512 | Kernel::Avx2 => false,
        }
    }

    /// The fastest supported tier: what [`Kernel::Auto`] resolves to.
    pub fn best() -> Kernel {
        Self::TIERS
            .into_iter()
            .find(|k| k.is_supported())
            .unwrap_or(Kernel::Portable)
    }

    /// The concrete tier this setting runs: [`Kernel::best`] for
    /// [`Kernel::Auto`], the tier itself when it is supported, and an error
    /// when it is not.
    pub fn resolve(self) -> Result<Kernel, crate::E5Error> {
        match self {
            Kernel::Auto => Ok(Self::best()),
            k if k.is_supported() => Ok(k),
            k => Err(crate::E5Error::KernelUnsupported { kernel: k }),
        }
    }

    /// Whether the tier runs the int8 (repacked) weights.
    pub(crate) fn is_int8(self) -> bool {
        matches!(self, Kernel::Amx)
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of [`Kernel::from_str`]: a name that is not a tier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown embedder kernel {0:?} (expected auto, amx, avx512, avx2 or portable)")]
pub struct ParseKernelError(pub String);

impl FromStr for Kernel {
    type Err = ParseKernelError;

    /// Parses the setting's spelling (ASCII case-insensitive, surrounding
    /// whitespace ignored).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        [Kernel::Auto]
            .into_iter()
            .chain(Kernel::TIERS)
            .find(|k| t.eq_ignore_ascii_case(k.as_str()))
            .ok_or_else(|| ParseKernelError(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in [Kernel::Auto].into_iter().chain(Kernel::TIERS) {
            assert_eq!(k.as_str().parse::<Kernel>(), Ok(k));
            assert_eq!(k.to_string(), k.as_str());
        }
        assert_eq!(" AVX512 ".parse::<Kernel>(), Ok(Kernel::Avx512));
        assert!("sse".parse::<Kernel>().is_err());
    }

    #[test]
    fn auto_resolves_to_a_supported_tier() {
        let best = Kernel::Auto.resolve().expect("auto always resolves");
        assert_ne!(best, Kernel::Auto);
        assert!(best.is_supported());
        assert_eq!(Kernel::Portable.resolve().ok(), Some(Kernel::Portable));
        for k in Kernel::TIERS {
            match k.resolve() {
                Ok(r) => assert_eq!(r, k),
                Err(e) => {
                    assert!(!k.is_supported());
                    eprintln!("SKIPPED: tier {k} is not supported on this CPU ({e})");
                }
            }
        }
    }
}
