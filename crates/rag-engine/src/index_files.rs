//! Derived indexes kept on disk next to the store, so a process starting
//! over a large knowledge base reads its indexes and applies the store's
//! change log instead of analysing every passage and building the graph
//! again. Per knowledge base:
//!
//! - `<index_dir>/<kb id>.lexd/`, the lexical index: one file per segment
//!   (`<name>.seg`, written once and never changed) and a `manifest`
//!   listing them in order with the commit, the dead passages, the
//!   dictionary, the synonyms and the facts (`rag_lexical::persist`).
//!   Storing a later commit writes only the segments made since (a write's
//!   small segment, a merge's result) and a new manifest; segments no
//!   manifest lists any more are deleted after it.
//! - `<index_dir>/<kb id>.vec`, the dense index with its graph, one file.
//!
//! The store stays the source of truth: a missing, unreadable, damaged or
//! newer-than-the-store file is ignored (and the index built from a
//! snapshot), so deleting these files loses nothing. Every file is written
//! to a temporary name, synced and renamed into place, segments before the
//! manifest that lists them, so a crash at any point leaves the old
//! manifest with its segments or the new one with its own (failpoints
//! `index.save.segment`, `index.save.before_rename` and
//! `index.save.after_rename`). Several processes may use one index
//! directory (a server and a command-line query): a save holds an exclusive
//! lock on the knowledge base's `LOCK` file, and a reader a shared one
//! while it reads the manifest and maps the segments it lists, so no save
//! deletes a segment another process's manifest still lists.

use rag_core::{failpoint, KbId};
use rag_lexical::{LexicalIndex, SegmentFile, SharedBytes};
use std::io::Write;
use std::path::{Path, PathBuf};

fn dense_path(dir: &Path, kb: KbId) -> PathBuf {
    dir.join(format!("{kb}.vec"))
}

/// The stored dense index of a knowledge base, the file mapped into
/// memory rather than read ([`crate::mapped`]), if there is a sound file.
/// With `check`, its trailing checksum is verified first; without, the
/// caller has just written it.
pub(crate) fn open_dense(dir: &Path, kb: KbId, check: bool) -> Option<SharedBytes> {
    let trailer = check.then_some(crate::mapped::Trailer::Fnv64);
    map_file(&dense_path(dir, kb), trailer, kb, false)
}

/// A file mapped into memory, if it is there and sound; `required` when
/// its absence is a fault (a segment a manifest lists) worth a warning.
fn map_file(
    path: &Path,
    check: Option<crate::mapped::Trailer>,
    kb: KbId,
    required: bool,
) -> Option<SharedBytes> {
    map_file_releasable(path, check, kb, required).map(|(bytes, _)| bytes)
}

/// [`map_file`], with the release of the mapping's pages.
fn map_file_releasable(
    path: &Path,
    check: Option<crate::mapped::Trailer>,
    kb: KbId,
    required: bool,
) -> Option<(SharedBytes, Option<crate::mapped::Release>)> {
    match crate::mapped::open(path, check) {
        Ok(opened) => Some(opened),
        Err(crate::mapped::OpenError::Missing) => {
            if required {
                tracing::warn!(kb = %kb, "a file of the stored index is missing; building it");
            }
            None
        }
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

/// Replaces the stored dense index of a knowledge base, atomically.
pub(crate) fn save_dense(dir: &Path, kb: KbId, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let target = dense_path(dir, kb);
    // Temporary files of a process that died before its rename.
    remove_temporaries(dir, &format!("{kb}.vec.tmp-"));
    let temp = dir.join(format!("{kb}.vec.tmp-{}", std::process::id()));
    write_synced(&temp, bytes, |temp| replace(temp, &target, dir))
}

/// The directory of a knowledge base's lexical index.
fn lexical_dir(dir: &Path, kb: KbId) -> PathBuf {
    dir.join(format!("{kb}.lexd"))
}

const MANIFEST: &str = "manifest";

fn segment_path(dir: &Path, name: u128) -> PathBuf {
    dir.join(format!("{name:032x}.seg"))
}

/// What storing a lexical index wrote.
#[derive(Debug, Default)]
pub(crate) struct LexicalSave {
    /// The segments written (their places in the index, and their files).
    pub written: Vec<(usize, SegmentFile)>,
    /// Bytes written, the manifest's included.
    pub bytes: u64,
}

/// Segment files a full build writes before any manifest lists them
/// (`segmented_build.rs`): a directory of their own in the knowledge
/// base's, `build-<name>/`, locked while the build runs so that no save
/// deletes it. The save at the end of the build moves its files into
/// place; a save finding the directory of a build whose process died (its
/// lock free) deletes it.
pub(crate) struct BuildDir {
    path: PathBuf,
    /// Held exclusively while the build runs.
    _lock: std::fs::File,
}

const BUILD_PREFIX: &str = "build-";

impl BuildDir {
    /// A new build directory for a knowledge base's segments.
    pub(crate) fn create(dir: &Path, kb: KbId) -> std::io::Result<BuildDir> {
        let ldir = lexical_dir(dir, kb);
        create_private_dir(&ldir)?;
        // Made and locked under the knowledge base's lock, so that no save
        // finds it unlocked (and deletes it) in between.
        let _kb_lock = locked(&ldir, false)?;
        let path = ldir.join(format!(
            "{BUILD_PREFIX}{:032x}",
            uuid::Uuid::now_v7().as_u128()
        ));
        create_private_dir(&path)?;
        let lock = locked(&path, true)?;
        Ok(BuildDir { path, _lock: lock })
    }

    /// Writes segment `i` of `index` to its file (synced) and reads it
    /// back in place: the segment to keep instead of the one on the heap.
    pub(crate) fn spill(
        &self,
        index: &LexicalIndex,
        i: usize,
    ) -> std::io::Result<rag_lexical::ReadSegment> {
        let file = write_segment(&self.path, index, i, uuid::Uuid::now_v7().as_u128())?;
        let path = segment_path(&self.path, file.name);
        let (mapped, release) = crate::mapped::open(&path, None).map_err(|e| match e {
            crate::mapped::OpenError::Io(e) => e,
            _ => std::io::Error::other("a segment just written is gone"),
        })?;
        let read = rag_lexical::LexicalIndex::read_segment(file, &mapped, false)
            .map_err(std::io::Error::other)?;
        // Its tables are on the heap now: their pages need not stay.
        release.iter().for_each(crate::mapped::Release::pages);
        Ok(read)
    }
}

/// Writes segment `i` of `index` into `dir` as `<name>.seg` (through a
/// temporary file, synced, then renamed), encoding it as it goes, and
/// records the file in the segment. A segment stored before under
/// another name, or whose bytes differ from its file's, is refused.
fn write_segment(
    dir: &Path,
    index: &LexicalIndex,
    i: usize,
    name: u128,
) -> std::io::Result<SegmentFile> {
    let temp = dir.join(format!("tmp-{}-{name:032x}", std::process::id()));
    let result = (|| {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, private_file(&temp)?);
        let (len, crc) = index.write_segment(i, &mut w)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        let file = SegmentFile { name, len, crc };
        // A segment stored before whose file is gone is written again
        // under its name only if it encodes to the same bytes.
        if !index.set_segment_file(i, file) {
            return Err(std::io::Error::other(format!(
                "the file of segment {i} is missing"
            )));
        }
        std::fs::rename(&temp, segment_path(dir, name))?;
        Ok(file)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// A new file readable by its owner only.
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

impl Drop for BuildDir {
    /// A build that ends without its save (its stream ended early) leaves
    /// nothing behind; after the save the directory is gone already.
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn create_private_dir(path: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700));
    }
    Ok(())
}

/// Moves a build's segment files into the knowledge base's directory and
/// deletes the build directories of builds that ended without a save
/// (their lock is free: the process died). The caller holds the
/// knowledge base's lock.
fn adopt_builds(ldir: &Path, adopt: Option<&BuildDir>) -> std::io::Result<()> {
    if let Some(build) = adopt {
        for e in std::fs::read_dir(&build.path)?.flatten() {
            let path = e.path();
            if path.extension().is_some_and(|x| x == "seg") {
                std::fs::rename(&path, ldir.join(e.file_name()))?;
            }
        }
        if let Ok(d) = std::fs::File::open(ldir) {
            let _ = d.sync_all();
        }
        let _ = std::fs::remove_dir_all(&build.path);
    }
    for e in std::fs::read_dir(ldir)?.flatten() {
        let path = e.path();
        if !e.file_name().to_string_lossy().starts_with(BUILD_PREFIX) || !path.is_dir() {
            continue;
        }
        let Ok(lock) = lock_file(&path) else {
            continue;
        };
        if fs4::fs_std::FileExt::try_lock_exclusive(&lock).is_ok_and(|locked| locked) {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
    Ok(())
}

/// Stores a knowledge base's lexical index: the files of the segments not
/// stored yet (moved from `adopt`, a build's directory, when it wrote
/// them), then a manifest listing all of them, then deletes the segment
/// files no manifest lists.
pub(crate) fn save_lexical(
    dir: &Path,
    kb: KbId,
    index: &LexicalIndex,
    adopt: Option<&BuildDir>,
) -> std::io::Result<LexicalSave> {
    let ldir = lexical_dir(dir, kb);
    create_private_dir(&ldir)?;
    let _lock = locked(&ldir, true)?;
    remove_temporaries(&ldir, "tmp-");
    adopt_builds(&ldir, adopt)?;
    let mut saved = LexicalSave::default();
    for i in 0..index.segment_count() {
        let stored = index.segment_file(i);
        if let Some(file) = stored {
            let on_disk = std::fs::metadata(segment_path(&ldir, file.name)).map(|m| m.len());
            if on_disk.ok() == Some(file.len) {
                continue;
            }
        }
        let name = stored.map_or_else(|| uuid::Uuid::now_v7().as_u128(), |f| f.name);
        let file = write_segment(&ldir, index, i, name)?;
        saved.written.push((i, file));
        saved.bytes += file.len;
        if failpoint::hit("index.save.segment") {
            return Err(std::io::Error::other("failpoint index.save.segment"));
        }
    }
    let manifest = index
        .encode_manifest()
        .ok_or_else(|| std::io::Error::other("a segment without its file"))?;
    let temp = ldir.join(format!("tmp-{}-{MANIFEST}", std::process::id()));
    write_synced(&temp, &manifest, |temp| {
        replace(temp, &ldir.join(MANIFEST), &ldir)
    })?;
    // Segments of earlier manifests, and the single file of earlier
    // versions.
    let listed: std::collections::HashSet<PathBuf> = (0..index.segment_count())
        .filter_map(|i| index.segment_file(i))
        .map(|f| segment_path(&ldir, f.name))
        .collect();
    if let Ok(entries) = std::fs::read_dir(&ldir) {
        for e in entries.flatten() {
            let path = e.path();
            if path.extension().is_some_and(|x| x == "seg") && !listed.contains(&path) {
                let _ = std::fs::remove_file(path);
            }
        }
    }
    let _ = std::fs::remove_file(dir.join(format!("{kb}.lex")));
    saved.bytes += manifest.len() as u64;
    Ok(saved)
}

/// A knowledge base's stored lexical index, if there is a sound one: its
/// manifest, and its segment files mapped into memory, in the manifest's
/// order, with the releases of their pages (for once their tables are
/// decoded). With `check`, each segment file's checksum is verified (the
/// manifest's always is).
pub(crate) fn open_lexical(
    dir: &Path,
    kb: KbId,
    check: bool,
) -> Option<(
    rag_lexical::Manifest,
    Vec<SharedBytes>,
    Vec<crate::mapped::Release>,
)> {
    let ldir = lexical_dir(dir, kb);
    if !ldir.exists() {
        return None;
    }
    let lock = match locked(&ldir, false) {
        Ok(lock) => lock,
        Err(e) => {
            tracing::warn!(kb = %kb, error = %e, "cannot lock the stored index; building it");
            return None;
        }
    };
    let manifest = match std::fs::read(ldir.join(MANIFEST)) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(kb = %kb, error = %e, "cannot read the stored index; building it");
            return None;
        }
    };
    let listed = match LexicalIndex::read_manifest(&manifest) {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(kb = %kb, error = %e, "the stored index is not usable; building it");
            return None;
        }
    };
    // Checking a file's checksum reads all of it: the files are checked
    // on every core, a share of them each.
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, listed.segments.len().max(1));
    let per = listed.segments.len().div_ceil(threads).max(1);
    let opened: Vec<Option<_>> = std::thread::scope(|scope| {
        let handles: Vec<_> = listed
            .segments
            .chunks(per)
            .map(|files| {
                scope.spawn(move || {
                    files
                        .iter()
                        .map(|f| open_segment(dir, kb, *f, check))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    drop(lock);
    if opened.len() != listed.segments.len() {
        return None;
    }
    let mut segments = Vec::with_capacity(opened.len());
    let mut releases = Vec::new();
    for o in opened {
        let (bytes, release) = o?;
        segments.push(bytes);
        releases.extend(release);
    }
    Some((listed, segments, releases))
}

/// The lock file of a knowledge base's lexical index directory (released
/// when dropped, or when the process dies).
fn lock_file(ldir: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(ldir.join("LOCK"))
}

/// The lock file of `ldir`, locked exclusively or shared (waiting for it).
fn locked(ldir: &Path, exclusive: bool) -> std::io::Result<std::fs::File> {
    let f = lock_file(ldir)?;
    if exclusive {
        fs4::fs_std::FileExt::lock_exclusive(&f)?;
    } else {
        fs4::fs_std::FileExt::lock_shared(&f)?;
    }
    Ok(f)
}

/// One stored segment's file, mapped into memory, with the release of its
/// pages.
pub(crate) fn open_segment(
    dir: &Path,
    kb: KbId,
    file: SegmentFile,
    check: bool,
) -> Option<(SharedBytes, Option<crate::mapped::Release>)> {
    let path = segment_path(&lexical_dir(dir, kb), file.name);
    map_file_releasable(
        &path,
        check.then_some(crate::mapped::Trailer::Crc32),
        kb,
        true,
    )
}

/// Deletes the files in `dir` whose names start with `prefix`: temporary
/// files of a process that died before its rename.
fn remove_temporaries(dir: &Path, prefix: &str) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with(prefix) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// Writes `bytes` to `temp` (readable by the owner only) and syncs them,
/// then calls `place` with it; `temp` is removed on any failure.
fn write_synced(
    temp: &Path,
    bytes: &[u8],
    place: impl FnOnce(&Path) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let result = (|| {
        let mut f = private_file(temp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        place(temp)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(temp);
    }
    result
}

/// Renames `temp` over `target` in `dir` and syncs the directory.
fn replace(temp: &Path, target: &Path, dir: &Path) -> std::io::Result<()> {
    if failpoint::hit("index.save.before_rename") {
        return Err(std::io::Error::other("failpoint index.save.before_rename"));
    }
    std::fs::rename(temp, target)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    failpoint::hit("index.save.after_rename");
    Ok(())
}

/// Forgets the stored lexical index of a knowledge base.
pub(crate) fn remove_lexical(dir: &Path, kb: KbId) {
    let _ = std::fs::remove_dir_all(lexical_dir(dir, kb));
    let _ = std::fs::remove_file(dir.join(format!("{kb}.lex")));
}

/// Forgets the stored dense index of a knowledge base.
pub(crate) fn remove_dense(dir: &Path, kb: KbId) {
    let _ = std::fs::remove_file(dense_path(dir, kb));
}
