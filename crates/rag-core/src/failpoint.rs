//! Failpoints for crash and fault tests.
//!
//! Code marks interesting places with [`hit`]. Nothing happens unless the
//! binary (the only crate that reads the environment) called [`configure`],
//! which it does from `RAGSCOPE_FAILPOINTS=name=action;name=action`. Actions:
//! `abort` (the process dies on the spot, as with a power cut or SIGKILL),
//! `stall` (prints `failpoint <name> stalled` to stderr and blocks forever, so a
//! test can kill the process at a known point), `spin` (burns CPU forever, as
//! a parser caught in a loop), `hog` (allocates memory until an allocation
//! fails, as a decompression bomb) and `error` (the caller turns it into an
//! error).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// What a configured failpoint does when hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Abort the process immediately.
    Abort,
    /// Announce on stderr and block forever.
    Stall,
    /// Burn CPU forever.
    Spin,
    /// Allocate (and touch) memory until an allocation fails.
    Hog,
    /// Return `true` from [`hit`] so the caller fails.
    Error,
}

static ENABLED: AtomicBool = AtomicBool::new(false);
static TABLE: OnceLock<HashMap<String, Action>> = OnceLock::new();

/// Parses and installs a failpoint specification. Call once, at start-up.
pub fn configure(spec: &str) -> Result<(), String> {
    let mut table = HashMap::new();
    for item in spec.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, action) = item
            .split_once('=')
            .ok_or_else(|| format!("failpoint {item:?} lacks '=action'"))?;
        let action = match action.trim() {
            "abort" => Action::Abort,
            "stall" => Action::Stall,
            "spin" => Action::Spin,
            "hog" => Action::Hog,
            "error" => Action::Error,
            other => return Err(format!("unknown failpoint action {other:?}")),
        };
        table.insert(name.trim().to_owned(), action);
    }
    if TABLE.set(table).is_err() {
        return Err("failpoints were configured twice".into());
    }
    ENABLED.store(true, Ordering::Release);
    Ok(())
}

/// Marks a failpoint. Returns `true` when the caller should fail with an error.
#[inline]
pub fn hit(name: &str) -> bool {
    if !ENABLED.load(Ordering::Acquire) {
        return false;
    }
    match TABLE.get().and_then(|t| t.get(name)) {
        None => false,
        Some(Action::Error) => true,
        Some(Action::Abort) => {
            eprintln!("failpoint {name} aborting");
            std::process::abort()
        }
        Some(Action::Spin) => {
            eprintln!("failpoint {name} spinning");
            let mut x = 0u64;
            loop {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        Some(Action::Hog) => {
            eprintln!("failpoint {name} hogging memory");
            let mut held: Vec<Vec<u8>> = Vec::new();
            loop {
                held.push(vec![1u8; 16 << 20]);
                std::hint::black_box(&held);
            }
        }
        Some(Action::Stall) => {
            eprintln!("failpoint {name} stalled");
            loop {
                std::thread::park();
            }
        }
    }
}
