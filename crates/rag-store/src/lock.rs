//! The data-directory lock: one writer per directory.

use crate::error::StoreError;
use fs4::fs_std::FileExt;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// Holds the exclusive lock until dropped (or the process dies, when the OS releases it).
#[derive(Debug)]
pub(crate) struct DirLock {
    _file: File,
}

impl DirLock {
    pub(crate) fn acquire(dir: &Path) -> Result<Self, StoreError> {
        let path = dir.join("LOCK");
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        // A new lock file is its owner's only; an existing one keeps its mode.
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&path).map_err(|source| StoreError::Io {
            op: "open",
            path: path.clone(),
            source,
        })?;
        match FileExt::try_lock_exclusive(&file) {
            Ok(true) => {}
            Ok(false) => {
                let mut s = String::new();
                let _ = file.read_to_string(&mut s);
                return Err(StoreError::Locked {
                    dir: dir.to_owned(),
                    pid: s.trim().parse().ok(),
                });
            }
            Err(source) => {
                return Err(StoreError::Io {
                    op: "lock",
                    path,
                    source,
                })
            }
        }
        let write_pid = |file: &mut File| -> std::io::Result<()> {
            file.set_len(0)?;
            file.seek(SeekFrom::Start(0))?;
            writeln!(file, "{}", std::process::id())?;
            file.sync_all()
        };
        write_pid(&mut file).map_err(|source| StoreError::Io {
            op: "write",
            path,
            source,
        })?;
        Ok(DirLock { _file: file })
    }
}
