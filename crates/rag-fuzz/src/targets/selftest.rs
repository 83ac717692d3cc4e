//! A target that misbehaves on purpose, to test the harness itself (not in
//! [`super::TARGETS`]; `by_name("selftest")` finds it). An input starting
//! with `panic`, `overflow`, `abort`, `oom`, `hang` or `slow` does that;
//! anything else returns.

use std::time::Duration;

use crate::mutate::Grammar;

/// No tokens: this target is not fuzzed.
pub const GRAMMAR: Grammar = Grammar {
    dict: &[],
    nest: &[],
    text: true,
};

fn deep(n: u64, pad: [u8; 512]) -> u64 {
    if n == 0 {
        return u64::from(pad[0]);
    }
    let mut p = std::hint::black_box(pad);
    p[(n % 512) as usize] = n as u8;
    deep(n - 1, p) + u64::from(p[1])
}

/// Runs one input.
pub fn run(bytes: &[u8]) -> u64 {
    if bytes.starts_with(b"panic") {
        panic!("selftest panic");
    }
    if bytes.starts_with(b"overflow") {
        return deep(u64::MAX, [0; 512]);
    }
    if bytes.starts_with(b"abort") {
        std::process::abort();
    }
    if bytes.starts_with(b"oom") {
        let v: Vec<u8> = Vec::with_capacity(std::hint::black_box(1 << 44));
        return v.capacity() as u64;
    }
    if bytes.starts_with(b"hang") {
        loop {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    if bytes.starts_with(b"slow") {
        std::thread::sleep(Duration::from_millis(300));
    }
    bytes.len() as u64
}
