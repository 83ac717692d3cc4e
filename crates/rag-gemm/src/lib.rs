//! Int8 and bf16 matrix products for the embedders' linear layers, with
//! the kernel chosen at run time from what the CPU has.
//!
//! Both embedders use this crate: `rag-e5` runs its AMX tier on
//! [`int8`], and `rag-bert` runs its `int8` and `bf16` precisions on
//! [`int8`] and [`bf16`]. Every product is `y = x * W^T + bias` with `x`
//! the activations of a batch of tokens (one row per token, all sequences
//! of a batch stacked) and `W` a weight matrix packed once at load.
//!
//! - [`int8`]: weights quantised per output channel, activations per
//!   token; tiers AMX-INT8 (`tdpbusd`), AVX-512 VNNI (`vpdpbusd`) and
//!   portable Rust, bit-identical to the scalar reference.
//! - [`bf16`]: weights and activations rounded to bfloat16, summed in f32;
//!   tiers AVX-512 BF16 (`vdpbf16ps`) and portable Rust, each within f32
//!   summation error of an f64 reference.
//!
//! The kernel modules (`int8::avx512`, `int8::amx`, `bf16::avx512`) are
//! the crate's only `unsafe` code; each checks the CPU features (and, for
//! AMX, the granted tile permission) and every shape before its
//! intrinsics run. Compute only: no I/O, no allocation inside the kernels.

pub mod bf16;
pub mod int8;

#[cfg(test)]
mod test_rng;

pub use bf16::{matmul_bf16, Bf16Acts, Bf16Matrix, Bf16Tier};
pub use int8::{combine_split, matmul_i8, matmul_i8_scalar, I8Acts, I8Matrix, Int8Tier};
