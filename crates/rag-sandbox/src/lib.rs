//! Untrusted files extracted in isolation.
//!
//! Any parser of outside bytes can have bugs: a PDF whose form draws itself
//! overflows the stack, a malformed structure loops forever, a zip bomb
//! exhausts memory. None of these may take the server down, and
//! `catch_unwind` contains none of them. So [`SandboxExtractor`] runs each
//! extraction in a child process (the same binary, started with
//! [`WORKER_ARG`]) that limits its own CPU time and address space before it
//! reads a byte, while the parent enforces the wall time. A child that runs
//! over a limit fails its file with `parse_limit`, one that crashes with
//! `parse_crash`; everything else goes on.
//!
//! * [`protocol`]: what goes over the child's stdin and stdout.
//! * [`worker`]: the child's side ([`run_worker`]), called by the binary's
//!   `main` before anything else when its first argument is [`WORKER_ARG`].
//! * [`parent`]: the [`rag_engine::Extractor`] that starts and watches the child.

mod parent;
pub mod protocol;
mod worker;

pub use parent::{SandboxExtractor, SandboxLimits};
pub use protocol::WORKER_ARG;
pub use worker::run_worker;
