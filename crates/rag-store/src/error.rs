//! Store errors.

use std::path::PathBuf;
use thiserror::Error;

/// What can go wrong opening or using the embedded store.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Another process holds the data directory for writing.
    #[error("the data directory {dir} is in use by another ragscope process{}", pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    Locked {
        /// The directory.
        dir: PathBuf,
        /// The holder's pid, if it wrote one.
        pid: Option<u32>,
    },
    /// A file operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// On what.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The data was written by a newer, incompatible ragscope.
    #[error("the data directory has store format {found}, newer than this ragscope supports ({supported}); upgrade ragscope")]
    NewerFormat {
        /// Format found on disk.
        found: u32,
        /// Newest format this build supports.
        supported: u32,
    },
    /// A read-only open found no database.
    #[error("no ragscope data in {0}; create a knowledge base first (ragscope kb create NAME)")]
    Missing(PathBuf),
    /// SQLite failed.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A stored value could not be decoded.
    #[error("corrupt value in {table}.{column}: {detail}")]
    Corrupt {
        /// Table.
        table: &'static str,
        /// Column.
        column: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// A failpoint fired.
    #[error("failpoint {0} fired")]
    Failpoint(&'static str),
}

impl From<StoreError> for rag_core::CoreError {
    fn from(e: StoreError) -> Self {
        rag_core::CoreError::Store(e.to_string())
    }
}
