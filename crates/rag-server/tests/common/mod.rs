//! A real server on an ephemeral loopback port, over a temporary embedded
//! store; it stops when the test drops it.

#![allow(dead_code)]

use rag_core::{KeyStore, Reranker};
use rag_engine::{Components, Engine, EngineConfig};
use rag_server::{AppState, Limits, ServerConfig};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub struct Server {
    pub url: String,
    pub admin_key: String,
    pub client: reqwest::Client,
    _dir: tempfile::TempDir,
    _stop: tokio::sync::oneshot::Sender<()>,
}

pub async fn start(limits: Limits, reranker: Option<Arc<dyn Reranker>>) -> Server {
    start_full(limits, reranker, None).await
}

pub async fn start_full(
    limits: Limits,
    reranker: Option<Arc<dyn Reranker>>,
    generator: Option<Arc<dyn rag_core::Generator>>,
) -> Server {
    start_with(limits, move |components| {
        if let Some(r) = reranker {
            components.reranker = r;
        }
        components.generator = generator;
    })
    .await
}

/// A server whose components the test adjusts (extractor, models, …).
pub async fn start_with(limits: Limits, configure: impl FnOnce(&mut Components)) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let store = rag_store::EmbeddedStore::open(dir.path(), rag_store::OpenMode::ReadWrite).unwrap();
    let mut components = Components::lexical(Arc::new(store.clone()));
    // The production default: private and loopback addresses are refused.
    components.fetcher = Some(Arc::new(
        rag_models::HttpFetcher::new(rag_models::FetchConfig::default()).unwrap(),
    ));
    configure(&mut components);
    let engine = Engine::new(components, EngineConfig::default());
    let keys: Arc<dyn KeyStore> = Arc::new(store);
    let admin_key = rag_server::ensure_admin_key(keys.as_ref())
        .await
        .unwrap()
        .expect("first start creates an admin key");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = ServerConfig {
        addr,
        open: false,
        log_queries: false,
        limits,
        cors_origins: vec!["https://shop.example".into()],
    };
    let state = AppState::new(engine, keys, config);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(rag_server::serve(listener, state, async move {
        let _ = rx.await;
    }));
    Server {
        url: format!("http://{addr}"),
        admin_key,
        client: reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(60))
            .build()
            .unwrap(),
        _dir: dir,
        _stop: tx,
    }
}

impl Server {
    pub fn api(&self, path: &str) -> String {
        format!("{}/api/v1{path}", self.url)
    }

    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        key: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let mut req = self.client.request(method, self.api(path)).bearer_auth(key);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        let text = res.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
        )
    }

    pub async fn post(
        &self,
        path: &str,
        key: &str,
        body: serde_json::Value,
    ) -> (u16, serde_json::Value) {
        self.call(reqwest::Method::POST, path, key, Some(body))
            .await
    }

    pub async fn get(&self, path: &str, key: &str) -> (u16, serde_json::Value) {
        self.call(reqwest::Method::GET, path, key, None).await
    }

    /// Creates a tenant and a read-write key for it.
    pub async fn tenant(&self, name: &str) -> String {
        let (s, _) = self
            .post(
                "/tenants",
                &self.admin_key,
                serde_json::json!({ "name": name }),
            )
            .await;
        assert_eq!(s, 201);
        let (s, body) = self
            .post(
                "/keys",
                &self.admin_key,
                serde_json::json!({ "tenant": name, "role": "read_write" }),
            )
            .await;
        assert_eq!(s, 201, "{body}");
        body["key"].as_str().unwrap().to_owned()
    }

    /// A read-write key of a tenant, acting for `owner` when given.
    pub async fn key_for(&self, tenant: &str, owner: Option<&str>) -> String {
        let (s, body) = self
            .post(
                "/keys",
                &self.admin_key,
                serde_json::json!({ "tenant": tenant, "role": "read_write", "owner": owner }),
            )
            .await;
        assert_eq!(s, 201, "{body}");
        body["key"].as_str().unwrap().to_owned()
    }

    /// Uploads one file; returns the SSE text.
    pub async fn upload(&self, kb: &str, key: &str, name: &str, bytes: Vec<u8>) -> String {
        let form = reqwest::multipart::Form::new().part(
            "file",
            reqwest::multipart::Part::bytes(bytes).file_name(name.to_owned()),
        );
        let res = self
            .client
            .post(self.api(&format!("/kbs/{kb}/documents")))
            .bearer_auth(key)
            .multipart(form)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 200);
        res.text().await.unwrap()
    }
}

/// Parses an SSE body into (event, data) pairs.
pub fn sse_events(text: &str) -> Vec<(String, serde_json::Value)> {
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let mut event = None;
        let mut data = String::new();
        for line in block.lines() {
            if let Some(e) = line.strip_prefix("event: ") {
                event = Some(e.to_owned());
            } else if let Some(d) = line.strip_prefix("data: ") {
                data.push_str(d);
            }
        }
        if let Some(e) = event {
            out.push((
                e,
                serde_json::from_str(&data).unwrap_or(serde_json::Value::Null),
            ));
        }
    }
    out
}

/// Reads one HTTP request from a stand-in's socket; returns its body, or
/// `None` when the client closed the connection first.
pub async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<String> {
    let mut buf = vec![0u8; 65536];
    let mut req = Vec::new();
    loop {
        let n = sock.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            return None;
        }
        req.extend_from_slice(&buf[..n]);
        if let Some(h) = req.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&req[..h]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap_or(0))
                })
                .unwrap_or(0);
            if req.len() >= h + 4 + len {
                return Some(String::from_utf8_lossy(&req[h + 4..h + 4 + len]).to_string());
            }
        }
    }
}

/// A loopback stand-in answering every request with `reply(request body)`
/// after `delay` (the test controls both).
pub async fn stand_in<F>(delay: Duration, reply: F) -> String
where
    F: Fn(&str) -> (u16, &'static str, String) + Send + Sync + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let reply = Arc::new(reply);
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let reply = reply.clone();
            tokio::spawn(async move {
                let Some(body) = read_request(&mut sock).await else {
                    return;
                };
                tokio::time::sleep(delay).await;
                let (status, content_type, payload) = reply(&body);
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    payload.len()
                );
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(payload.as_bytes()).await;
            });
        }
    });
    url
}
