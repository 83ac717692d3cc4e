//! Restarting loses nothing; a process killed in the middle of an ingest
//! leaves the whole document or none of it; one writer per data directory.
//! Crashes are placed with failpoints, not timing.

mod common;
use common::*;
use std::process::Stdio;

fn doc_count(data: &std::path::Path, kb: &str) -> usize {
    let mut c = cmd(data);
    c.args(["kb", "list", "--json"]);
    let r = ok(c);
    let kbs: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(kbs.as_array().unwrap().iter().any(|k| k["name"] == kb));
    // Documents are counted through the human listing, which the JSON form lacks.
    let mut c = cmd(data);
    c.args(["kb", "list"]);
    let r = ok(c);
    let line = r
        .stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(kb))
        .unwrap()
        .to_owned();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn long_doc(dir: &std::path::Path) -> std::path::PathBuf {
    // Many paragraphs, so the document has many chunks and the failpoint sits between them.
    let mut text = String::from("# 配送说明\n\n");
    for i in 0..60 {
        text.push_str(&format!("第{i}段：骑手会在出餐后尽快配送，恶劣天气可能延迟，请耐心等待。我们保证餐品包装完好。\n\n"));
    }
    let p = dir.join("long.md");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn restart_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut c = cmd(&data);
    c.args(["kb", "create", "kb1"]);
    ok(c);
    let f = dir.path().join("faq.csv");
    std::fs::write(&f, "question,answer\n发票怎么开,下单时填写抬头即可\n").unwrap();
    let mut c = cmd(&data);
    c.args(["ingest", "--kb", "kb1"]).arg(&f);
    ok(c);
    // A new process sees it.
    let s = sources(&query_events(&data, "kb1", "發票", &[]));
    assert!(s[0].0.contains("发票"));
    // The same file again is recognised, not duplicated.
    let mut c = cmd(&data);
    c.args(["ingest", "--kb", "kb1"]).arg(&f);
    let r = ok(c);
    assert!(r.stdout.contains("already present"), "{}", r.stdout);
}

#[test]
fn abort_mid_document_leaves_nothing_half_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut c = cmd(&data);
    c.args(["kb", "create", "kb1"]);
    ok(c);
    let first = dir.path().join("first.md");
    std::fs::write(&first, "# 营业\n\n每天 16:00 开门。\n").unwrap();
    let mut c = cmd(&data);
    c.args(["ingest", "--kb", "kb1"]).arg(&first);
    ok(c);
    let doc = long_doc(dir.path());

    // The process dies (abort, like a power cut) half-way through writing the chunks.
    let mut c = cmd(&data);
    c.args(["ingest", "--kb", "kb1"])
        .arg(&doc)
        .env("RAGSCOPE_FAILPOINTS", "store.put_document.mid_chunks=abort");
    let out = c.output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("failpoint store.put_document.mid_chunks aborting"));

    // None of the document, all of what came before.
    assert_eq!(doc_count(&data, "kb1"), 1);
    let s = sources(&query_events(&data, "kb1", "配送 骑手", &[]));
    assert!(
        s.iter().all(|(_, b)| !b.contains("骑手")),
        "half a document is searchable: {s:?}"
    );

    // Ingesting again works and stores all of it.
    let mut c = cmd(&data);
    c.args(["ingest", "--kb", "kb1"]).arg(&doc);
    let r = ok(c);
    assert!(r.stdout.contains("chunks"), "{}", r.stdout);
    assert_eq!(doc_count(&data, "kb1"), 2);
}

#[test]
fn killed_while_writing_and_second_writer_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut c = cmd(&data);
    c.args(["kb", "create", "kb1"]);
    ok(c);
    let doc = long_doc(dir.path());

    // The writer stalls inside the transaction; the test kills it there with SIGKILL.
    let mut c = cmd(&data);
    c.args(["ingest", "--kb", "kb1"])
        .arg(&doc)
        .env("RAGSCOPE_FAILPOINTS", "store.apply.before_commit=stall")
        .stderr(Stdio::piped())
        .stdout(Stdio::null());
    let mut child = c.spawn().unwrap();
    wait_for_stall(&mut child, "store.apply.before_commit");

    // While it holds the data directory, a second writer is refused clearly.
    let mut c = cmd(&data);
    c.args(["kb", "create", "kb2"]);
    let r = run(c);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("in use by another ragscope process"),
        "{}",
        r.stderr
    );

    child.kill().unwrap();
    child.wait().unwrap();

    assert_eq!(doc_count(&data, "kb1"), 0);
    let mut c = cmd(&data);
    c.args(["ingest", "--kb", "kb1"]).arg(&doc);
    ok(c);
    assert_eq!(doc_count(&data, "kb1"), 1);
    // The lock is free again.
    let mut c = cmd(&data);
    c.args(["kb", "create", "kb2"]);
    ok(c);
}

#[test]
fn killed_while_storing_the_index_leaves_the_old_or_the_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut c = cmd(&data);
    c.args(["kb", "create", "kb1"]);
    ok(c);
    let f = dir.path().join("faq.csv");
    std::fs::write(&f, "question,answer\n发票怎么开,下单时填写抬头即可\n").unwrap();
    let mut c = cmd(&data);
    c.args(["ingest", "--kb", "kb1"]).arg(&f);
    ok(c);
    let index_dir = data.join("index");
    for point in [
        "index.save.segment",
        "index.save.before_rename",
        "index.save.after_rename",
    ] {
        let _ = std::fs::remove_dir_all(&index_dir);
        // The first query builds the index and dies while storing it.
        let mut c = cmd(&data);
        c.args(["query", "--kb", "kb1", "--json", "发票"])
            .env("RAGSCOPE_FAILPOINTS", format!("{point}=abort"));
        let out = c.output().unwrap();
        assert!(!out.status.success(), "{point}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&format!("failpoint {point} aborting")),
            "{point}"
        );
        // A manifest only once renamed into place, and every segment it
        // lists beside it.
        let manifests: Vec<_> = std::fs::read_dir(&index_dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "lexd"))
            .filter(|p| p.join("manifest").exists())
            .collect();
        assert_eq!(
            manifests.len(),
            usize::from(point.ends_with("after_rename")),
            "{point}"
        );
        for lexd in &manifests {
            let manifest = std::fs::read(lexd.join("manifest")).unwrap();
            let listed = rag_lexical::LexicalIndex::read_manifest(&manifest).unwrap();
            for f in listed.segments {
                let bytes = std::fs::read(lexd.join(format!("{:032x}.seg", f.name))).unwrap();
                assert_eq!(bytes.len() as u64, f.len, "{point}");
            }
        }
        // The next process answers, from the file or from the store.
        let s = sources(&query_events(&data, "kb1", "發票", &[]));
        assert!(s[0].0.contains("发票"), "{point}: {s:?}");
    }
    // A write after the file was stored is found by the next process.
    std::fs::write(&f, "question,answer\n营业时间,每天 16:00 开门\n").unwrap();
    let mut c = cmd(&data);
    c.args(["ingest", "--kb", "kb1"]).arg(&f);
    ok(c);
    let s = sources(&query_events(&data, "kb1", "营业时间", &[]));
    assert!(s[0].0.contains("营业时间"), "{s:?}");
}

#[test]
fn killed_while_building_in_segments_leaves_the_old_state() {
    let dir = tempfile::tempdir().unwrap();
    let (data, index_dir) = four_faqs_without_index(dir.path());
    // One passage a segment: the build writes four segment files, and
    // dies after the first.
    let mut c = cmd(&data);
    c.args(["query", "--kb", "kb1", "--json", "发票"])
        .env("RAGSCOPE_INDEX__SEGMENT_PASSAGES", "1")
        .env("RAGSCOPE_FAILPOINTS", "index.build.spilled=abort");
    let out = c.output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("failpoint index.build.spilled aborting"));
    let lexd = std::fs::read_dir(&index_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "lexd"))
        .expect("the knowledge base's index directory");
    let names = |d: &std::path::Path| -> Vec<String> {
        let mut n: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        n.sort();
        n
    };
    // No manifest: nothing of the half-made build is used; its one
    // segment is in its build directory.
    let left = names(&lexd);
    assert!(!left.contains(&"manifest".to_owned()), "{left:?}");
    let builds: Vec<&String> = left.iter().filter(|n| n.starts_with("build-")).collect();
    assert_eq!(builds.len(), 1, "{left:?}");
    let segs = names(&lexd.join(builds[0]));
    assert_eq!(
        segs.iter().filter(|n| n.ends_with(".seg")).count(),
        1,
        "{segs:?}"
    );
    // The next process builds again, answers, and stores four segments and
    // a manifest; the dead build's directory is gone.
    let mut c = cmd(&data);
    c.args(["query", "--kb", "kb1", "--json", "營業時間"])
        .env("RAGSCOPE_INDEX__SEGMENT_PASSAGES", "1");
    let r = ok(c);
    let events: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let s = sources(&events);
    assert!(s[0].0.contains("营业时间"), "{s:?}");
    let now = names(&lexd);
    assert!(now.contains(&"manifest".to_owned()), "{now:?}");
    assert!(!now.iter().any(|n| n.starts_with("build-")), "{now:?}");
    assert_eq!(
        now.iter().filter(|n| n.ends_with(".seg")).count(),
        4,
        "{now:?}"
    );
    // And a process with the default segment size reads those files.
    let s = sources(&query_events(&data, "kb1", "怎么退款", &[]));
    assert!(s[0].0.contains("退款"), "{s:?}");
}

#[test]
fn a_store_failing_mid_stream_leaves_no_index_behind() {
    let dir = tempfile::tempdir().unwrap();
    let (data, index_dir) = four_faqs_without_index(dir.path());
    // One passage a part and a segment: the store fails after its third
    // part, when the build has written segments of it.
    let mut c = cmd(&data);
    c.args(["query", "--kb", "kb1", "--json", "发票"])
        .env("RAGSCOPE_INDEX__SEGMENT_PASSAGES", "1")
        .env("RAGSCOPE_FAILPOINTS", "store.snapshot.stream=error");
    let r = run(c);
    assert!(
        r.stdout.contains("store.snapshot.stream") || r.stderr.contains("store.snapshot.stream"),
        "the store's failure is told: {}\n{}",
        r.stdout,
        r.stderr
    );
    // Nothing of the half-read snapshot is stored: no manifest, no segment
    // file, no build directory.
    let left: Vec<String> = walk(&index_dir);
    assert!(
        !left
            .iter()
            .any(|n| n.ends_with("manifest") || n.ends_with(".seg") || n.contains("build-")),
        "{left:?}"
    );
    // The next process builds from the whole snapshot and answers.
    let mut c = cmd(&data);
    c.args(["query", "--kb", "kb1", "--json", "营业时间"])
        .env("RAGSCOPE_INDEX__SEGMENT_PASSAGES", "1");
    let r = ok(c);
    assert!(r.stdout.contains("每天 16:00 开门"), "{}", r.stdout);
    assert_eq!(
        walk(&index_dir)
            .iter()
            .filter(|n| n.ends_with(".seg"))
            .count(),
        4
    );
}

/// A data directory in `dir` whose knowledge base kb1 holds four FAQ
/// entries, with no index files: the next query builds them.
fn four_faqs_without_index(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let data = dir.join("data");
    let mut c = cmd(&data);
    c.args(["kb", "create", "kb1"]);
    ok(c);
    let f = dir.join("faq.csv");
    std::fs::write(
        &f,
        "question,answer\n发票怎么开,下单时填写抬头即可\n营业时间,每天 16:00 开门\n怎么退款,在订单页申请\n运费多少,满 30 元免运费\n",
    )
    .unwrap();
    let mut c = cmd(&data);
    c.args(["ingest", "--kb", "kb1"]).arg(&f);
    ok(c);
    let index_dir = data.join("index");
    let _ = std::fs::remove_dir_all(&index_dir);
    (data, index_dir)
}

/// Every path under `dir` (none when it does not exist).
fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        out.push(p.display().to_string());
        if p.is_dir() {
            out.extend(walk(&p));
        }
    }
    out
}
