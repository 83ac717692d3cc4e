//! Derived indexes kept on disk next to the store, two files per knowledge
//! base (`<index_dir>/<kb id>.lex`, the lexical index, and `<kb id>.vec`,
//! the dense one with its graph), so a process starting over a large
//! knowledge base reads its indexes and applies the store's change log
//! instead of analysing every passage and building the graph again.
//!
//! The store stays the source of truth: a missing, unreadable, damaged or
//! newer-than-the-store file is ignored (and the index built from a
//! snapshot), so deleting these files loses nothing. A file is written to a
//! temporary name, synced and renamed over the old one, so a crash at any
//! point leaves the old file or the new one (failpoints
//! `index.save.before_rename` and `index.save.after_rename`).

use rag_core::{failpoint, KbId};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Which index a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IndexFile {
    /// The lexical index.
    Lexical,
    /// The dense index.
    Dense,
}

impl IndexFile {
    fn ext(self) -> &'static str {
        match self {
            IndexFile::Lexical => "lex",
            IndexFile::Dense => "vec",
        }
    }
}

fn path(dir: &Path, kb: KbId, file: IndexFile) -> PathBuf {
    dir.join(format!("{kb}.{}", file.ext()))
}

/// The stored bytes of a knowledge base's index, the file mapped into
/// memory rather than read ([`crate::mapped`]), if there is a sound file.
/// With `check`, its trailing checksum is verified first; without, the
/// caller has just written it.
pub(crate) fn open_mapped(
    dir: &Path,
    kb: KbId,
    file: IndexFile,
    check: bool,
) -> Option<rag_ann::SharedBytes> {
    let trailer = match file {
        IndexFile::Lexical => crate::mapped::Trailer::Crc32,
        IndexFile::Dense => crate::mapped::Trailer::Fnv64,
    };
    match crate::mapped::open(&path(dir, kb, file), check.then_some(trailer)) {
        Ok(bytes) => Some(bytes),
        Err(crate::mapped::OpenError::Missing) => None,
        Err(crate::mapped::OpenError::Damaged) => {
            tracing::warn!(kb = %kb, "the stored index is damaged; building it");
            None
        }
        Err(crate::mapped::OpenError::Io(e)) => {
            tracing::warn!(kb = %kb, error = %e, "cannot read the stored index; building it");
            None
        }
    }
}

/// Replaces the stored index of a knowledge base, atomically.
pub(crate) fn save(dir: &Path, kb: KbId, file: IndexFile, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let target = path(dir, kb, file);
    // Temporary files of a process that died before its rename.
    let prefix = format!("{kb}.{}.tmp-", file.ext());
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let temp = dir.join(format!("{prefix}{}", std::process::id()));
    let result = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut f = options.open(&temp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        if failpoint::hit("index.save.before_rename") {
            return Err(std::io::Error::other("failpoint index.save.before_rename"));
        }
        std::fs::rename(&temp, &target)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        failpoint::hit("index.save.after_rename");
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// Forgets one stored index of a knowledge base.
pub(crate) fn remove(dir: &Path, kb: KbId, file: IndexFile) {
    let _ = std::fs::remove_file(path(dir, kb, file));
}
