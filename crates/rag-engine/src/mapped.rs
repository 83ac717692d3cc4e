//! Index files read in place: memory-mapped, after their checksum has been
//! checked by reading them, so that a process opening a large dense index
//! keeps resident only the pages its searches touch (the rows of the
//! candidates it rescores) rather than a heap copy of every vector.
//!
//! This module holds the engine's only `unsafe` code: the call that maps a
//! file. Mapping is sound only while nobody changes the file's bytes; the
//! engine never writes an index file in place (`index_files::save` writes a
//! new file and renames it over the old one, which leaves an existing
//! mapping on the old, unchanged inode), and the files are created
//! readable and writable by their owner only.
#![allow(unsafe_code)]

use rag_ann::format::Checksum;
use rag_ann::SharedBytes;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

/// A read-only mapping of a whole file.
struct Mapping(memmap2::Mmap);

impl AsRef<[u8]> for Mapping {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// Why a file was not opened.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// There is no such file.
    Missing,
    /// It could not be read or mapped.
    Io(io::Error),
    /// Its trailing checksum does not match its bytes.
    Damaged,
}

/// The bytes of a file whose last 8 bytes are the
/// [`rag_ann::format::checksum`] of all before them, checked, then mapped.
/// Where the file cannot be mapped, its bytes are read into memory instead.
pub(crate) fn open_checked(path: &Path) -> Result<SharedBytes, OpenError> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(OpenError::Missing),
        Err(e) => return Err(OpenError::Io(e)),
    };
    let len = file.metadata().map_err(OpenError::Io)?.len();
    if len < 8 {
        return Err(OpenError::Damaged);
    }
    if !checksum_matches(&mut file, len).map_err(OpenError::Io)? {
        return Err(OpenError::Damaged);
    }
    // SAFETY: the mapping is read-only and index files are never changed in
    // place (see the module docs); the length was checked against the
    // checksum just now, and a file replaced since is another inode.
    match unsafe { memmap2::Mmap::map(&file) } {
        Ok(map) if map.len() as u64 == len => Ok(Arc::new(Mapping(map))),
        _ => {
            let mut bytes = Vec::with_capacity(len as usize);
            file.seek(SeekFrom::Start(0)).map_err(OpenError::Io)?;
            file.read_to_end(&mut bytes).map_err(OpenError::Io)?;
            let (body, sum) = bytes.split_at(bytes.len().saturating_sub(8));
            if sum.len() != 8 || rag_ann::format::checksum(body).to_le_bytes() != sum {
                return Err(OpenError::Damaged);
            }
            Ok(Arc::new(bytes))
        }
    }
}

/// Whether the file's last 8 bytes are the checksum of the rest, read
/// through a small buffer so no page of it stays in the process's memory.
fn checksum_matches(file: &mut File, len: u64) -> io::Result<bool> {
    let mut sum = Checksum::new();
    let mut body = (&mut *file).take(len - 8);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = body.read(&mut buf)?;
        if n == 0 {
            break;
        }
        sum.update(&buf[..n]);
    }
    if body.limit() != 0 {
        return Ok(false);
    }
    let mut stored = [0u8; 8];
    file.read_exact(&mut stored)?;
    Ok(sum.finish() == u64::from_le_bytes(stored))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checked_file_is_mapped_and_damage_or_absence_is_told() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.vec");
        assert!(matches!(open_checked(&path), Err(OpenError::Missing)));
        let mut bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let sum = rag_ann::format::checksum(&bytes);
        bytes.extend_from_slice(&sum.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let mapped = open_checked(&path).unwrap();
        assert_eq!((*mapped).as_ref(), &bytes[..]);
        // Page-aligned, so an aligned section inside can be read in place.
        assert_eq!((*mapped).as_ref().as_ptr() as usize % 64, 0);
        bytes[1_234_567] ^= 4;
        std::fs::write(&path, &bytes).unwrap();
        assert!(matches!(open_checked(&path), Err(OpenError::Damaged)));
        std::fs::write(&path, [1u8, 2, 3]).unwrap();
        assert!(matches!(open_checked(&path), Err(OpenError::Damaged)));
        // The mapping made before the file was replaced still reads the old bytes.
        assert_eq!((*mapped).as_ref().len(), bytes.len());
    }
}
