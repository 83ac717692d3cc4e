//! Index files read in place: memory-mapped, after their checksum has been
//! checked by reading them, so that a process opening a large dense index
//! keeps resident only the pages its searches touch (the rows of the
//! candidates it rescores) rather than a heap copy of every vector.
//!
//! This module holds the engine's `unsafe` code for files (`heap.rs` has
//! the other): the call that maps a file, and the one that drops its pages. Mapping is sound only while nobody changes the file's bytes; the
//! engine never writes an index file in place (`index_files` writes a
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

/// The checksum that ends a file, over all the bytes before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trailer {
    /// 8 bytes: [`rag_ann::format::checksum`] (the dense index file).
    Fnv64,
    /// 4 bytes: CRC-32 (the lexical index file).
    Crc32,
}

impl Trailer {
    fn len(self) -> u64 {
        match self {
            Trailer::Fnv64 => 8,
            Trailer::Crc32 => 4,
        }
    }
}

/// Checksums fed in pieces.
enum Sum {
    Fnv(Checksum),
    Crc(crc32fast::Hasher),
}

impl Sum {
    fn new(trailer: Trailer) -> Self {
        match trailer {
            Trailer::Fnv64 => Sum::Fnv(Checksum::new()),
            Trailer::Crc32 => Sum::Crc(crc32fast::Hasher::new()),
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        match self {
            Sum::Fnv(s) => s.update(bytes),
            Sum::Crc(s) => s.update(bytes),
        }
    }

    /// Whether the sum equals the stored trailer bytes.
    fn matches(self, stored: &[u8]) -> bool {
        match self {
            Sum::Fnv(s) => s.finish().to_le_bytes() == stored,
            Sum::Crc(s) => s.finalize().to_le_bytes() == stored,
        }
    }
}

/// Drops the pages of a mapping from this process's memory once what was
/// read from them is decoded: they stay in the page cache, and what is
/// touched again (by queries) is mapped back in from it. Used after the
/// tables of a segment file are read onto the heap, so that they are not
/// resident twice.
pub(crate) struct Release(Arc<Mapping>);

impl Release {
    pub(crate) fn pages(&self) {
        // SAFETY: MADV_DONTNEED on a read-only mapping of a file that is
        // never changed in place (see the module docs) only drops page
        // table entries; the next access reads the same bytes back from the
        // file.
        #[cfg(unix)]
        unsafe {
            let _ = self
                .0
                 .0
                .unchecked_advise(memmap2::UncheckedAdvice::DontNeed);
        }
    }
}

/// The bytes of a file, mapped. With `check`, the file ends with that
/// checksum of all before it, which is verified by reading first; `None` is
/// for a file this process has just written and synced. Where the file
/// cannot be mapped, its bytes are read into memory instead.
/// With the bytes comes a [`Release`] of the pages when the file is mapped
/// (not when its bytes were read onto the heap).
pub(crate) fn open(
    path: &Path,
    check: Option<Trailer>,
) -> Result<(SharedBytes, Option<Release>), OpenError> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(OpenError::Missing),
        Err(e) => return Err(OpenError::Io(e)),
    };
    let len = file.metadata().map_err(OpenError::Io)?.len();
    if let Some(trailer) = check {
        if len < trailer.len()
            || !checksum_matches(&mut file, len, trailer).map_err(OpenError::Io)?
        {
            return Err(OpenError::Damaged);
        }
    }
    // SAFETY: the mapping is read-only and index files are never changed in
    // place (see the module docs); a file replaced since it was opened is
    // another inode.
    match unsafe { memmap2::Mmap::map(&file) } {
        Ok(map) if map.len() as u64 == len => {
            let mapping = Arc::new(Mapping(map));
            Ok((mapping.clone(), Some(Release(mapping))))
        }
        // Not mappable: the same file's bytes, checked above, read instead.
        _ => {
            let mut bytes = Vec::with_capacity(len as usize);
            file.seek(SeekFrom::Start(0)).map_err(OpenError::Io)?;
            file.read_to_end(&mut bytes).map_err(OpenError::Io)?;
            Ok((Arc::new(bytes), None))
        }
    }
}

/// Whether the file's trailer is the checksum of the rest, read through a
/// small buffer so no page of it stays in the process's memory.
fn checksum_matches(file: &mut File, len: u64, trailer: Trailer) -> io::Result<bool> {
    let mut sum = Sum::new(trailer);
    let mut body = (&mut *file).take(len - trailer.len());
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
    let stored = &mut stored[..trailer.len() as usize];
    file.read_exact(stored)?;
    Ok(sum.matches(stored))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checked_file_is_mapped_and_damage_or_absence_is_told() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.vec");
        assert!(matches!(
            open(&path, Some(Trailer::Fnv64)),
            Err(OpenError::Missing)
        ));
        let mut bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let sum = rag_ann::format::checksum(&bytes);
        bytes.extend_from_slice(&sum.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let (mapped, release) = open(&path, Some(Trailer::Fnv64)).unwrap();
        assert_eq!((*mapped).as_ref(), &bytes[..]);
        // Page-aligned, so an aligned section inside can be read in place.
        assert_eq!((*mapped).as_ref().as_ptr() as usize % 64, 0);
        // Its pages dropped, the mapping reads the same bytes again.
        release.expect("a mapped file").pages();
        assert_eq!((*mapped).as_ref(), &bytes[..]);
        bytes[1_234_567] ^= 4;
        std::fs::write(&path, &bytes).unwrap();
        assert!(matches!(
            open(&path, Some(Trailer::Fnv64)),
            Err(OpenError::Damaged)
        ));
        std::fs::write(&path, [1u8, 2, 3]).unwrap();
        assert!(matches!(
            open(&path, Some(Trailer::Fnv64)),
            Err(OpenError::Damaged)
        ));
        // A CRC-32 trailer, as the lexical file has.
        let mut lex = b"some index bytes".to_vec();
        let crc = crc32fast::hash(&lex);
        lex.extend_from_slice(&crc.to_le_bytes());
        std::fs::write(&path, &lex).unwrap();
        assert_eq!(
            (*open(&path, Some(Trailer::Crc32)).unwrap().0).as_ref(),
            &lex[..]
        );
        assert!(matches!(
            open(&path, Some(Trailer::Fnv64)),
            Err(OpenError::Damaged)
        ));
        // The mapping made before the file was rewritten is of the old inode
        // only if the file was replaced by a rename; here it was rewritten
        // in place, which the engine never does, so only its length is kept.
        assert_eq!((*mapped).as_ref().len(), bytes.len());
    }
}
