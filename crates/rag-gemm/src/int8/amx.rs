//! The AMX-INT8 kernel: `tdpbusd` on 16 x 64 byte tiles, written in inline
//! assembly (the AMX intrinsics are not stable Rust), with the AVX-512
//! epilogue of [`super::avx512`].
//!
//! Linux keeps the tile data registers disabled until a process asks for
//! them with `arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`; the
//! first tile instruction without that permission kills the process with
//! `SIGILL`. [`has_amx`] asks once, and the tier is only used when the
//! answer was yes.

use super::avx512::{finish16, has_avx512_vnni};
use super::{I8Acts, I8Matrix, TILE_K, TILE_M, TILE_N};
use std::arch::asm;
use std::arch::x86_64::{__cpuid_count, _mm512_loadu_si512};

/// `arch_prctl` on x86-64 Linux.
const SYS_ARCH_PRCTL: usize = 158;
/// Requests permission for an extended state component.
const ARCH_REQ_XCOMP_PERM: usize = 0x1023;
/// The AMX tile data state component.
const XFEATURE_XTILEDATA: usize = 18;

/// Whether this CPU has AMX-TILE and AMX-INT8 (CPUID leaf 7, EDX bits 24
/// and 25), AVX-512 VNNI for the epilogue, and Linux granted this process
/// the tile registers. Detected (and requested) once.
pub fn has_amx() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        let leaf7 = __cpuid_count(7, 0);
        let cpu = (leaf7.edx >> 24) & 1 == 1 && (leaf7.edx >> 25) & 1 == 1;
        cpu && has_avx512_vnni() && cfg!(target_os = "linux") && request_tile_permission()
    })
}

/// `arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`: true when the
/// kernel granted (or had already granted) the tile data registers.
fn request_tile_permission() -> bool {
    if !cfg!(target_os = "linux") {
        return false;
    }
    let ret: isize;
    // SAFETY: a raw Linux system call with integer arguments; the kernel
    // clobbers rcx and r11 (declared) and touches no memory of ours. A
    // kernel without the request returns -EINVAL.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") SYS_ARCH_PRCTL as isize => ret,
            in("rdi") ARCH_REQ_XCOMP_PERM,
            in("rsi") XFEATURE_XTILEDATA,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret == 0
}

/// The 64-byte tile configuration (palette 1): tiles 0 to 7 all 16 rows of
/// 64 bytes. Tiles 0-3 accumulate a 2 x 2 block of 16 x 16 int32 outputs,
/// tiles 4-5 hold two blocks of 16 tokens x 64 activations, tiles 6-7 two
/// blocks of 64 inputs x 16 channels of weights.
#[repr(C, align(64))]
struct TileConfig([u8; 64]);

impl TileConfig {
    fn new() -> Self {
        let mut c = [0u8; 64];
        c[0] = 1; // palette
        for t in 0..8 {
            c[16 + 2 * t..18 + 2 * t].copy_from_slice(&64u16.to_le_bytes());
            c[48 + t] = 16;
        }
        Self(c)
    }
}

/// Four 16 x 16 int32 accumulator tiles, stored.
#[repr(C, align(64))]
struct Acc([[i32; 256]; 4]);

/// [`super::matmul_i8_scalar`] on AMX: for each block of 32 channels and 32
/// tokens, the whole input width is accumulated in four tiles (two
/// activation tiles times two weight tiles per 64 inputs), stored, and
/// finished in AVX-512. At an odd number of 16-token or 16-channel tiles
/// the last block repeats a tile instead of loading out of bounds, and the
/// duplicate results are not written.
///
/// # Panics
///
/// If AMX is not available ([`has_amx`]), or the shapes disagree.
pub(crate) fn matmul(w: &I8Matrix, x: &I8Acts, y: &mut [f32]) {
    assert!(
        has_amx(),
        "the AMX kernel needs AMX-INT8 and the tile permission"
    );
    w.check_shapes(x, y);
    if x.rows == 0 {
        return;
    }
    // SAFETY: the CPU has AMX and AVX-512 and the process may use the tiles
    // (asserted above); `check_shapes` asserted the sizes the pointer
    // arithmetic relies on.
    unsafe { matmul_amx(w, x, y) }
}

/// # Safety
///
/// [`has_amx`] is true, `w.check_shapes(x, y)` holds and `x.rows > 0`.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn matmul_amx(w: &I8Matrix, x: &I8Acts, y: &mut [f32]) {
    let cfg = TileConfig::new();
    // SAFETY: loads a valid palette-1 configuration from 64 readable bytes.
    unsafe { asm!("ldtilecfg [{}]", in(reg) cfg.0.as_ptr(), options(nostack, readonly)) };
    let mtiles = x.rows_padded / TILE_M;
    let ntiles = w.np / TILE_N;
    let kblocks = w.kp / TILE_K;
    let tile_stream = w.kp * TILE_N; // bytes of one channel tile's weights
    let mut acc = Acc([[0; 256]; 4]);
    for nt in (0..ntiles).step_by(2) {
        let nt1 = if nt + 1 < ntiles { nt + 1 } else { nt };
        for mt in (0..mtiles).step_by(2) {
            let mt1 = if mt + 1 < mtiles { mt + 1 } else { mt };
            // The last row and byte each tile load touches, as offsets: A
            // tiles read 16 rows of `kp` bytes from row `16 * mt`, B tiles
            // `tile_stream` bytes from `nt * tile_stream`.
            assert!((mt1 + 1) * TILE_M * x.kp <= x.u.len());
            assert!((nt1 + 1) * tile_stream <= w.data.len());
            // SAFETY: the offsets are within the buffers (asserted above);
            // the loop advances each A pointer by 64 bytes and each B
            // pointer by 1 KiB `kblocks` times, which stays inside the
            // asserted ranges; the four stores write the 4 KiB of `acc`.
            unsafe {
                let a0 = x.u.as_ptr().add(mt * TILE_M * x.kp);
                let a1 = x.u.as_ptr().add(mt1 * TILE_M * x.kp);
                let b0 = w.data.as_ptr().add(nt * tile_stream);
                let b1 = w.data.as_ptr().add(nt1 * tile_stream);
                asm!(
                    "tilezero tmm0",
                    "tilezero tmm1",
                    "tilezero tmm2",
                    "tilezero tmm3",
                    "2:",
                    "tileloadd tmm4, [{a0} + {sa}*1]",
                    "tileloadd tmm5, [{a1} + {sa}*1]",
                    "tileloadd tmm6, [{b0} + {sb}*1]",
                    "tileloadd tmm7, [{b1} + {sb}*1]",
                    "tdpbusd tmm0, tmm4, tmm6",
                    "tdpbusd tmm1, tmm4, tmm7",
                    "tdpbusd tmm2, tmm5, tmm6",
                    "tdpbusd tmm3, tmm5, tmm7",
                    "add {a0}, 64",
                    "add {a1}, 64",
                    "add {b0}, 1024",
                    "add {b1}, 1024",
                    "dec {n}",
                    "jnz 2b",
                    "tilestored [{c} + {sb}*1], tmm0",
                    "add {c}, 1024",
                    "tilestored [{c} + {sb}*1], tmm1",
                    "add {c}, 1024",
                    "tilestored [{c} + {sb}*1], tmm2",
                    "add {c}, 1024",
                    "tilestored [{c} + {sb}*1], tmm3",
                    a0 = inout(reg) a0 => _,
                    a1 = inout(reg) a1 => _,
                    b0 = inout(reg) b0 => _,
                    b1 = inout(reg) b1 => _,
                    n = inout(reg) kblocks => _,
                    c = inout(reg) acc.0.as_mut_ptr() => _,
                    sa = in(reg) x.kp,
                    sb = in(reg) 64usize,
                    options(nostack),
                );
            }
            let blocks = [(mt, nt), (mt, nt1), (mt1, nt), (mt1, nt1)];
            for (i, &(m, n)) in blocks.iter().enumerate() {
                if (i % 2 == 1 && nt1 == nt) || (i >= 2 && mt1 == mt) {
                    continue; // a repeated tile
                }
                let o0 = n * TILE_N;
                let end = (o0 + TILE_N).min(w.nout);
                for r in 0..TILE_M {
                    let t = m * TILE_M + r;
                    if t >= x.rows {
                        break;
                    }
                    let row: &[i32; TILE_N] = acc.0[i][r * TILE_N..(r + 1) * TILE_N]
                        .try_into()
                        .expect("a row");
                    // SAFETY: reads the 64 bytes of a 16-element array.
                    let v = unsafe { _mm512_loadu_si512(row.as_ptr().cast()) };
                    finish16(
                        v,
                        w,
                        o0,
                        x.scale[t],
                        &mut y[t * w.nout + o0..t * w.nout + end],
                    );
                }
            }
        }
    }
    // SAFETY: returns the tiles to their initial state.
    unsafe { asm!("tilerelease", options(nostack, nomem)) };
}
