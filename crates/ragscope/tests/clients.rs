//! The real client libraries against the real binary: the official MCP
//! Python SDK over stdio (`ragscope mcp`) and over streamable HTTP
//! (`ragscope serve`'s `/mcp`), and the official `openai` package against
//! `/v1`, streaming included. The scripts are `scripts/clients/*.py`; their
//! pinned environment comes from `scripts/clients/setup-python.sh`, which
//! `scripts/test` runs and names in `PROTOCOL_CLIENTS_VENV` (default:
//! `.venv-clients` in the checkout). Without it these tests fail, saying so.
//! Servers listen on 127.0.0.1 only and are killed when a test ends.

mod common;

use common::{cmd, ok};
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const FAQS: &str = r#"{"question":"怎么申请退款？","answer":"在订单页点击申请退款，三个工作日内原路退回。","tags":["售后"],"source_url":"https://shop.example/help/refund"}
{"question":"配送要多久？","answer":"同城配送一般两小时内送达。","tags":["物流"]}
{"question":"你们的营业时间是几点到几点？","answer":"每天九点到晚上十点营业，周末十点开门。"}
{"question":"How do I reset my password?","answer":"Use the reset link on the sign-in page; it expires after 30 minutes."}
"#;

/// How long one client script may take.
const SCRIPT_DEADLINE: Duration = Duration::from_secs(300);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The clients' Python, or a failure that says how to get it.
fn python() -> PathBuf {
    let venv = std::env::var_os("PROTOCOL_CLIENTS_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv-clients"));
    let python = venv.join("bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/clients/setup-python.sh (scripts/test does, and sets PROTOCOL_CLIENTS_VENV)",
        python.display()
    );
    python
}

/// A data directory with the knowledge base `shop` (no embedder).
fn shop() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let faq = dir.path().join("faq.jsonl");
    std::fs::write(&faq, FAQS).unwrap();
    let mut c = cmd(&data);
    c.args(["--embedder", "none", "kb", "create", "shop"]);
    ok(c);
    let mut c = cmd(&data);
    c.args(["--embedder", "none", "ingest", "--kb", "shop"])
        .arg(&faq);
    ok(c);
    dir
}

/// Runs a client script to its end (killed at the deadline); panics with
/// its output unless it succeeded.
fn run_script(script: &str, args: &[&str]) -> String {
    let mut c = Command::new(python());
    c.arg(repo().join("scripts/clients").join(script))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("PYTHONUNBUFFERED", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("the clients' python runs");
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = read(Box::new(child.stdout.take().unwrap()));
    let err = read(Box::new(child.stderr.take().unwrap()));
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > SCRIPT_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    match status {
        Some(s) if s.success() => out,
        Some(s) => panic!("{script} failed ({s}):\n{out}\n{err}"),
        None => panic!(
            "{script} did not finish within {} s:\n{out}\n{err}",
            SCRIPT_DEADLINE.as_secs()
        ),
    }
}

#[test]
fn the_mcp_sdk_works_over_stdio() {
    let dir = shop();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let out = run_script(
        "mcp_client.py",
        &[
            "stdio",
            common::BIN,
            "--data-dir",
            data,
            "--embedder",
            "none",
        ],
    );
    assert!(out.contains("mcp client: all checks passed"), "{out}");
}

/// `ragscope serve` in key mode on an ephemeral loopback port, killed when dropped.
struct Served {
    child: Child,
    url: String,
    key: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(data: &Path) -> Served {
    let mut c = cmd(data);
    c.args(["--embedder", "none", "serve", "--addr", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut key = None;
    let url = loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the server exited before listening"
        );
        if line.trim().starts_with("rsk_") {
            key = Some(line.trim().to_owned());
        }
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
    };
    std::thread::spawn(move || for _ in out.lines() {});
    Served {
        child,
        url,
        key: key.expect("the first start prints the admin key"),
    }
}

#[test]
fn the_mcp_sdk_and_the_openai_package_work_over_http() {
    let dir = shop();
    let server = serve(&dir.path().join("data"));
    let out = run_script(
        "mcp_client.py",
        &["http", &format!("{}/mcp", server.url), &server.key],
    );
    assert!(out.contains("mcp client: all checks passed"), "{out}");
    let out = run_script(
        "openai_client.py",
        &[&format!("{}/v1", server.url), &server.key],
    );
    assert!(out.contains("openai client: all checks passed"), "{out}");
}
