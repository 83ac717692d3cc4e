//! Ingestion core of ragscope.
#![warn(missing_docs)]

mod encoding;
mod error;
mod hash;

pub use encoding::{decode_text, DecodedText, TextEncoding};
pub use error::IngestError;
pub use hash::sha256_hex;
