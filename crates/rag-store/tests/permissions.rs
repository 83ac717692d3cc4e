//! File modes of the data directory on unix (issue 15, item 9): a new data
//! directory is private to its owner (0700) and so are the database, its
//! write-ahead log and shared-memory files and the lock file (0600); an
//! existing directory keeps the mode its operator gave it.
#![cfg(unix)]

use rag_core::{KbSettings, StoreWrite, TenantId};
use rag_store::{EmbeddedStore, OpenMode};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const FILES: [&str; 4] = [
    "ragscope.sqlite3",
    "ragscope.sqlite3-wal",
    "ragscope.sqlite3-shm",
    "LOCK",
];

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

/// Opens `dir` for writing and creates the knowledge base `kb`, so that every file exists.
fn open_and_write(dir: &Path, kb: &str) -> EmbeddedStore {
    let store = EmbeddedStore::open(dir, OpenMode::ReadWrite).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(store.create_kb(&TenantId::default_tenant(), kb, KbSettings::default()))
        .unwrap();
    store
}

fn assert_files_private(dir: &Path) {
    for name in FILES {
        let m = mode(&dir.join(name));
        assert_eq!(m, 0o600, "{name} has mode {m:o}");
    }
}

#[test]
fn a_new_data_directory_and_its_files_are_private() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data").join("ragscope");
    let store = open_and_write(&dir, "kb1");
    for (what, path) in [
        ("data directory", dir.clone()),
        ("parent", root.path().join("data")),
    ] {
        let m = mode(&path);
        assert_eq!(m, 0o700, "the new {what} has mode {m:o}");
    }
    assert_files_private(&dir);
    drop(store);
    // Reopening changes nothing, and a read-only open creates no file.
    let store = open_and_write(&dir, "kb2");
    assert_files_private(&dir);
    drop(store);
    let reader = EmbeddedStore::open(&dir, OpenMode::ReadOnly).unwrap();
    assert_files_private(&dir);
    drop(reader);
}

#[test]
fn an_existing_directory_keeps_its_mode_and_new_files_are_private() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("shared");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o750)).unwrap();
    let store = open_and_write(&dir, "kb3");
    let m = mode(&dir);
    assert_eq!(m, 0o750, "the existing directory now has mode {m:o}");
    assert_files_private(&dir);
    drop(store);
}
