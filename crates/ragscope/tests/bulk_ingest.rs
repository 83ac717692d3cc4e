//! Bulk ingest through the real binary: files in batches (extractions
//! shared between small files, one write per batch), a hostile file that
//! fails alone inside a batch, a worker that dies with its whole batch, and
//! a re-run after a crash that skips what was committed.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// `n` small Markdown files, each with its own word `wordN`.
fn notes(dir: &Path, n: usize) -> PathBuf {
    let folder = dir.join("notes");
    std::fs::create_dir_all(&folder).unwrap();
    for i in 0..n {
        std::fs::write(
            folder.join(format!("note-{i:04}.md")),
            format!("# Note {i}\n\nThe reference number of this note is word{i}.\n"),
        )
        .unwrap();
    }
    folder
}

fn lexical(data: &Path) -> std::process::Command {
    let mut c = cmd(data);
    c.args(["--embedder", "none"]);
    c
}

fn create_kb(data: &Path) {
    let mut c = lexical(data);
    c.args(["kb", "create", "kb1"]);
    ok(c);
}

fn ingest(data: &Path, what: &Path, env: &[(&str, &str)]) -> Run {
    let mut c = lexical(data);
    c.args(["ingest", "--kb", "kb1", "--json"]).arg(what);
    for (k, v) in env {
        c.env(k, v);
    }
    run(c)
}

/// The `status` of each file's JSON line, by file name.
fn statuses(r: &Run) -> Vec<(String, String, String)> {
    r.stdout
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("one JSON line per file");
            let name = v["source"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_owned();
            (
                name,
                v["status"].as_str().unwrap().to_owned(),
                v["code"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn count(s: &[(String, String, String)], status: &str) -> usize {
    s.iter().filter(|(_, st, _)| st == status).count()
}

fn finds(data: &Path, word: &str) -> bool {
    let mut c = lexical(data);
    c.args(["query", "--kb", "kb1", "--json", word]);
    let r = ok(c);
    r.stdout.contains(&format!("{word}."))
}

#[test]
fn many_files_in_batches_one_line_each_duplicates_skipped_rerun_skips_all() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    create_kb(&data);
    // More files than one batch holds, plus a copy of one file's content.
    let folder = notes(dir.path(), 300);
    std::fs::copy(folder.join("note-0007.md"), folder.join("zz-copy.md")).unwrap();
    let r = ingest(&data, &folder, &[]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let s = statuses(&r);
    assert_eq!(s.len(), 301, "one line per file");
    assert_eq!(count(&s, "document"), 300);
    // Lines come in the order of the files.
    let names: Vec<&str> = s.iter().map(|(n, _, _)| n.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    assert_eq!(s[300].1, "skipped", "{:?}", s[300]);
    assert!(finds(&data, "word0"));
    assert!(finds(&data, "word299"));

    let again = ingest(&data, &folder, &[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(count(&statuses(&again), "skipped"), 301);
}

#[test]
fn a_hostile_file_in_a_batch_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    create_kb(&data);
    let folder = notes(dir.path(), 6);
    // A 653-byte PDF that asks the PDF library for 22 GB: the worker of its
    // batch runs over its memory limit, and the batch is extracted again
    // one file per worker.
    let known =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../rag-fuzz/known/pdf/huge-allocation.pdf");
    std::fs::copy(known, folder.join("note-0003-bad.pdf")).unwrap();
    let r = ingest(&data, &folder, &[]);
    assert_eq!(r.code, 2, "one file failed: {}\n{}", r.stdout, r.stderr);
    let s = statuses(&r);
    assert_eq!(count(&s, "document"), 6, "{s:?}");
    let bad: Vec<_> = s.iter().filter(|(_, st, _)| st == "failed").collect();
    assert_eq!(bad.len(), 1, "{s:?}");
    assert_eq!(bad[0].0, "note-0003-bad.pdf");
    assert!(
        ["parse_limit", "parse_crash", "malformed_file"].contains(&bad[0].2.as_str()),
        "{bad:?}"
    );
    for i in 0..6 {
        assert!(finds(&data, &format!("word{i}")), "word{i}");
    }
}

#[test]
fn a_batch_whose_worker_dies_is_extracted_again_file_by_file() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    create_kb(&data);
    let folder = notes(dir.path(), 10);
    // Every batch worker aborts; single-file workers do not hit the failpoint.
    let r = ingest(
        &data,
        &folder,
        &[("RAGSCOPE_FAILPOINTS", "extract.worker.batch=abort")],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(count(&statuses(&r), "document"), 10);
    assert!(finds(&data, "word9"));
}

#[test]
fn killed_after_a_batch_the_rerun_skips_what_was_committed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    create_kb(&data);
    let folder = notes(dir.path(), 600);
    // The first batch (256 files) is committed, then the process stalls and
    // is killed with SIGKILL.
    let mut c = lexical(&data);
    c.args(["ingest", "--kb", "kb1"])
        .arg(&folder)
        .env("RAGSCOPE_FAILPOINTS", "ingest.batch.committed=stall")
        .stderr(Stdio::piped())
        .stdout(Stdio::null());
    let mut child = c.spawn().unwrap();
    wait_for_stall(&mut child, "ingest.batch.committed");
    child.kill().unwrap();
    child.wait().unwrap();

    let r = ingest(&data, &folder, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let s = statuses(&r);
    assert_eq!(count(&s, "skipped"), 256, "the first batch was committed");
    assert_eq!(count(&s, "document"), 600 - 256);
    assert!(s[..256].iter().all(|(_, st, _)| st == "skipped"));
    assert!(finds(&data, "word0"));
    assert!(finds(&data, "word599"));
}
