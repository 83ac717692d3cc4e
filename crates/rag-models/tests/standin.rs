//! Fault behaviour of the embeddings client against a stand-in server the
//! test controls: scripted statuses, a server that never answers, malformed
//! bodies. The stand-in listens on loopback and stops with the test.

use rag_models::{ModelError, OpenAiEmbedder, OpenAiEmbedderConfig};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[derive(Clone)]
enum Reply {
    Status(u16, &'static str, String),
    /// Accept the request and never answer.
    Hang,
    /// Answer with one vector of `dims` per input.
    Vectors(usize),
}

struct StandIn {
    url: String,
    hits: Arc<AtomicUsize>,
    bodies: Arc<Mutex<Vec<String>>>,
    auth: Arc<Mutex<Vec<Option<String>>>>,
}

async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<(String, String)> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    loop {
        let n = sock.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap_or(0))
                })
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = sock.read(&mut tmp).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&tmp[..n]);
            }
            return Some((
                head,
                String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).to_string(),
            ));
        }
    }
}

async fn stand_in(script: Vec<Reply>) -> StandIn {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let auth = Arc::new(Mutex::new(Vec::new()));
    let (h, b, a) = (hits.clone(), bodies.clone(), auth.clone());
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let (h, b, a, script) = (h.clone(), b.clone(), a.clone(), script.clone());
            tokio::spawn(async move {
                while let Some((head, body)) = read_request(&mut sock).await {
                    let i = h.fetch_add(1, Ordering::SeqCst);
                    a.lock().unwrap().push(head.lines().find_map(|l| {
                        l.to_ascii_lowercase()
                            .starts_with("authorization:")
                            .then(|| l[14..].trim().to_owned())
                    }));
                    let reply = script
                        .get(i)
                        .cloned()
                        .unwrap_or_else(|| script.last().cloned().unwrap());
                    let (status, extra, payload) = match reply {
                        Reply::Hang => {
                            b.lock().unwrap().push(body);
                            std::future::pending::<()>().await;
                            unreachable!()
                        }
                        Reply::Status(s, extra, p) => (s, extra, p),
                        Reply::Vectors(dims) => {
                            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                            let n = v["input"].as_array().map(|a| a.len()).unwrap_or(1);
                            let data: Vec<serde_json::Value> = (0..n)
                                .rev()
                                .map(|i| serde_json::json!({"index": i, "embedding": vec![i as f32 + 1.0; dims]}))
                                .collect();
                            (200, "", serde_json::json!({"data": data}).to_string())
                        }
                    };
                    b.lock().unwrap().push(body);
                    let resp = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{extra}\r\n{payload}",
                        payload.len()
                    );
                    if sock.write_all(resp.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    StandIn {
        url,
        hits,
        bodies,
        auth,
    }
}

fn config(url: &str) -> OpenAiEmbedderConfig {
    OpenAiEmbedderConfig {
        base_url: url.into(),
        api_key: Some("sk-test-secret".into()),
        model: "m".into(),
        batch_size: 2,
        timeout_ms: 2_000,
        max_retries: 2,
        backoff_ms: 1,
        ..OpenAiEmbedderConfig::default()
    }
}

#[tokio::test]
async fn batches_keep_input_order_and_send_the_key() {
    let s = stand_in(vec![Reply::Vectors(4)]).await;
    let e = OpenAiEmbedder::new(config(&s.url)).unwrap();
    let v = e.embed_batch(&["a", "b", "c"], false).await.unwrap();
    assert_eq!(v.len(), 3);
    // The stand-in returns the items in reverse order with their index; order is restored.
    assert_eq!(v[0][0], 1.0);
    assert_eq!(v[1][0], 2.0);
    assert_eq!(v[2][0], 1.0, "third text is the first of the second batch");
    assert_eq!(
        s.hits.load(Ordering::SeqCst),
        2,
        "two batches of at most two"
    );
    assert_eq!(
        s.auth.lock().unwrap()[0].as_deref(),
        Some("Bearer sk-test-secret")
    );
    assert!(
        !format!("{e:?}").contains("sk-test-secret"),
        "the key must not appear in Debug output"
    );
}

#[tokio::test]
async fn server_errors_are_retried_then_succeed() {
    let s = stand_in(vec![
        Reply::Status(503, "", "{\"error\":\"busy\"}".into()),
        Reply::Status(429, "retry-after: 0\r\n", "{}".into()),
        Reply::Vectors(3),
    ])
    .await;
    let e = OpenAiEmbedder::new(config(&s.url)).unwrap();
    let v = e.embed_batch(&["x"], true).await.unwrap();
    assert_eq!(v[0].len(), 3);
    assert_eq!(s.hits.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn persistent_failure_gives_up_with_a_clear_error() {
    let s = stand_in(vec![Reply::Status(
        500,
        "",
        "{\"error\":\"model crashed\"}".into(),
    )])
    .await;
    let e = OpenAiEmbedder::new(config(&s.url)).unwrap();
    match e.embed_batch(&["x"], true).await {
        Err(ModelError::Http {
            status: 500,
            attempts: 3,
            body,
            ..
        }) => assert!(body.contains("model crashed")),
        other => panic!("unexpected: {other:?}"),
    }
}

#[tokio::test]
async fn wrong_key_is_not_retried() {
    let s = stand_in(vec![Reply::Status(
        401,
        "",
        "{\"error\":\"bad key\"}".into(),
    )])
    .await;
    let e = OpenAiEmbedder::new(config(&s.url)).unwrap();
    let err = e.embed_batch(&["x"], true).await.unwrap_err();
    assert!(
        matches!(err, ModelError::Unauthorized { status: 401, .. }),
        "{err:?}"
    );
    assert!(!err.to_string().contains("sk-test-secret"));
    assert_eq!(s.hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_silent_server_times_out() {
    let s = stand_in(vec![Reply::Hang]).await;
    let e = OpenAiEmbedder::new(OpenAiEmbedderConfig {
        timeout_ms: 200,
        max_retries: 1,
        ..config(&s.url)
    })
    .unwrap();
    let err = e.embed_batch(&["x"], true).await.unwrap_err();
    assert!(
        matches!(
            err,
            ModelError::Timeout {
                timeout_ms: 200,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(s.bodies.lock().unwrap().len(), 2, "one retry");
}

#[tokio::test]
async fn malformed_answers_are_refused() {
    let s = stand_in(vec![Reply::Status(200, "", "{\"data\": \"nope\"}".into())]).await;
    let e = OpenAiEmbedder::new(config(&s.url)).unwrap();
    assert!(matches!(
        e.embed_batch(&["x"], true).await,
        Err(ModelError::BadResponse { .. })
    ));

    let s = stand_in(vec![Reply::Status(
        200,
        "",
        "{\"data\": [{\"embedding\": [1.0]}, {\"embedding\": [1.0, 2.0]}]}".into(),
    )])
    .await;
    let e = OpenAiEmbedder::new(config(&s.url)).unwrap();
    assert!(matches!(
        e.embed_batch(&["x", "y"], true).await,
        Err(ModelError::WrongDimension {
            expected: 1,
            got: 2
        })
    ));

    let s = stand_in(vec![Reply::Status(
        200,
        "",
        "{\"data\": [{\"embedding\": [1.0]}]}".into(),
    )])
    .await;
    let e = OpenAiEmbedder::new(config(&s.url)).unwrap();
    assert!(matches!(
        e.embed_batch(&["x", "y"], true).await,
        Err(ModelError::BadResponse { .. })
    ));
}

#[tokio::test]
async fn unreachable_endpoint_and_bad_config() {
    // A port nothing listens on: bind, note the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = OpenAiEmbedder::new(OpenAiEmbedderConfig {
        max_retries: 0,
        ..config(&format!("http://127.0.0.1:{port}/v1"))
    })
    .unwrap();
    assert!(matches!(
        e.embed_batch(&["x"], true).await,
        Err(ModelError::Connect { .. })
    ));
    assert!(matches!(
        OpenAiEmbedder::new(config("ftp://x")),
        Err(ModelError::Config(_))
    ));
}
