//! Support for the workbench's browser tests: a real server on an ephemeral
//! loopback port (open mode or keyed), seeded with the repository's demo
//! knowledge base through the API, and a minimal Chrome DevTools Protocol
//! client driving Debian's headless `chromium` over its WebSocket.
//!
//! Chromium is required: when it is missing the tests fail with the command
//! that installs it (`scripts/setup-browser.sh`).

#![allow(dead_code)]

use base64::Engine as _;
use futures::{SinkExt, StreamExt};
use rag_core::KeyStore;
use rag_engine::{Components, Engine, EngineConfig};
use rag_server::{AppState, Limits, ServerConfig};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

/// How long any awaited condition may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(45);

// ---------------------------------------------------------------- server

pub struct Server {
    pub url: String,
    pub admin_key: String,
    pub client: reqwest::Client,
    _dir: tempfile::TempDir,
    _stop: oneshot::Sender<()>,
}

/// A deterministic stand-in embedder for the embedding map: character
/// bigrams hashed into 64 dimensions, normalised. Texts sharing words land
/// near each other, which is all the map needs to be checked.
pub struct HashEmbedder;

impl HashEmbedder {
    fn vector(text: &str) -> Vec<f32> {
        let chars: Vec<char> = text
            .to_lowercase()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let mut v = vec![0f32; 64];
        for w in chars.windows(2) {
            let mut h: u64 = 0xcbf29ce484222325;
            for c in w {
                h ^= *c as u64;
                h = h.wrapping_mul(0x100000001b3);
            }
            v[(h % 64) as usize] += 1.0;
        }
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
        v.iter().map(|x| x / n).collect()
    }
}

#[async_trait::async_trait]
impl rag_core::Embedder for HashEmbedder {
    fn model_id(&self) -> &str {
        "test-hash-bigram-64"
    }
    fn dimensions(&self) -> usize {
        64
    }
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, rag_core::CoreError> {
        Ok(Self::vector(text))
    }
    async fn embed_documents(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, rag_core::CoreError> {
        Ok(texts.iter().map(|t| Self::vector(t)).collect())
    }
}

pub async fn start(open: bool) -> Server {
    start_with(open, false).await
}

/// `embedder`: run with [`HashEmbedder`] (vectors stored on ingest, dense path on).
pub async fn start_with(open: bool, embedder: bool) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let store = rag_store::EmbeddedStore::open(dir.path(), rag_store::OpenMode::ReadWrite).unwrap();
    let mut components = Components::lexical(Arc::new(store.clone()));
    if embedder {
        components.embedder = Some(Arc::new(HashEmbedder));
    }
    // The ingest test serves a small site on loopback.
    let fetch = rag_models::FetchConfig {
        allow_private: true,
        timeout_ms: 5_000,
        ..rag_models::FetchConfig::default()
    };
    components.fetcher = Some(Arc::new(rag_models::HttpFetcher::new(fetch).unwrap()));
    let engine = Engine::new(components, EngineConfig::default());
    let keys: Arc<dyn KeyStore> = Arc::new(store);
    let admin_key = rag_server::ensure_admin_key(keys.as_ref())
        .await
        .unwrap()
        .expect("first start creates an admin key");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = AppState::new(
        engine,
        keys,
        ServerConfig {
            addr,
            open,
            log_queries: false,
            limits: Limits::default(),
            cors_origins: Vec::new(),
        },
    );
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(rag_server::serve(listener, state, async move {
        let _ = rx.await;
    }));
    Server {
        url: format!("http://{addr}"),
        admin_key,
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
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
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .client
            .request(method, self.api(path))
            .bearer_auth(&self.admin_key);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        let text = res.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Uploads files in one multipart request; returns the SSE text.
    pub async fn upload(&self, kb: &str, files: Vec<(String, Vec<u8>)>) -> String {
        let mut form = reqwest::multipart::Form::new();
        for (name, bytes) in files {
            form = form.part(
                "file",
                reqwest::multipart::Part::bytes(bytes).file_name(name),
            );
        }
        let res = self
            .client
            .post(self.api(&format!("/kbs/{kb}/documents")))
            .bearer_auth(&self.admin_key)
            .multipart(form)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 200);
        res.text().await.unwrap()
    }

    /// The `demo` knowledge base from the repository's demo/ folder (FAQ,
    /// documents, synonyms and facts), loaded through the API.
    pub async fn seed_demo(&self) {
        let (s, b) = self
            .call(
                reqwest::Method::POST,
                "/kbs",
                Some(json!({ "name": "demo" })),
            )
            .await;
        assert_eq!(s, 201, "{b}");
        let demo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../demo");
        let mut files = vec![(
            "faq.jsonl".to_owned(),
            std::fs::read(demo.join("faq.jsonl")).unwrap(),
        )];
        let mut docs: Vec<_> = std::fs::read_dir(demo.join("docs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        docs.sort();
        for p in docs {
            files.push((
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            ));
        }
        let n = files.len();
        let text = self.upload("demo", files).await;
        assert_eq!(
            text.matches("event: indexed").count(),
            n,
            "every demo file is indexed: {text}"
        );
        let rows = |name: &str| -> Vec<Vec<String>> {
            std::fs::read_to_string(demo.join(name))
                .unwrap()
                .lines()
                .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
                .map(|l| l.split('\t').map(str::to_owned).collect())
                .collect()
        };
        let groups: Vec<Value> = rows("synonyms.tsv")
            .into_iter()
            .filter(|r| r.len() >= 2)
            .map(|r| json!({ "terms": r }))
            .collect();
        let (s, b) = self
            .call(
                reqwest::Method::POST,
                "/kbs/demo/synonyms",
                Some(Value::Array(groups)),
            )
            .await;
        assert_eq!(s, 200, "{b}");
        let facts: Vec<Value> = rows("facts.tsv")
            .into_iter()
            .filter(|r| r.len() >= 2)
            .map(|r| {
                let syn: Vec<&str> = r.get(2).map(|s| s.split('|').collect()).unwrap_or_default();
                json!({ "key": r[0], "value": r[1], "key_synonyms": syn })
            })
            .collect();
        let (s, b) = self
            .call(
                reqwest::Method::POST,
                "/kbs/demo/facts",
                Some(Value::Array(facts)),
            )
            .await;
        assert_eq!(s, 200, "{b}");
    }

    /// A new key of the default tenant with this role.
    pub async fn key(&self, role: &str) -> String {
        let (s, b) = self
            .call(
                reqwest::Method::POST,
                "/keys",
                Some(json!({ "role": role, "label": "browser test" })),
            )
            .await;
        assert_eq!(s, 201, "{b}");
        b["key"].as_str().unwrap().to_owned()
    }
}

// ---------------------------------------------------------------- browser

fn chromium_binary() -> PathBuf {
    if let Ok(p) = std::env::var("RAGSCOPE_CHROMIUM") {
        return PathBuf::from(p);
    }
    for name in ["chromium", "chromium-browser"] {
        for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!("chromium is not installed: the workbench's browser tests need Debian's chromium. Run `bash scripts/setup-browser.sh` (or set RAGSCOPE_CHROMIUM).");
}

/// Where screenshots go: `target/browser-artifacts/`.
pub fn artifacts_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/browser-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// One headless chromium with one page, driven over CDP.
pub struct Browser {
    child: Child,
    out: mpsc::UnboundedSender<Message>,
    pending: Pending,
    next: AtomicU64,
    /// Uncaught exceptions and console errors of the page.
    pub errors: Arc<Mutex<Vec<String>>>,
    name: String,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    /// Starts chromium headless with a fresh profile and attaches to its page.
    /// `name` prefixes the screenshots.
    pub async fn launch(name: &str) -> Browser {
        let bin = chromium_binary();
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new(&bin)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-default-apps",
                "--disable-sync",
                "--no-first-run",
                "--no-default-browser-check",
                "--remote-debugging-port=0",
                "--remote-allow-origins=*",
                "--window-size=1440,1000",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {}: {e}; run `bash scripts/setup-browser.sh`",
                    bin.display()
                )
            });
        // Chromium prints the browser's WebSocket address on stderr once it listens.
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent {
                    if let Some(pos) = line.find("ws://") {
                        let _ = tx.send(line[pos..].trim().to_owned());
                        sent = true;
                    }
                }
            }
        });
        let browser_ws = tokio::task::spawn_blocking(move || rx.recv_timeout(DEADLINE))
            .await
            .unwrap()
            .expect("chromium printed its DevTools address");
        let port = browser_ws
            .trim_start_matches("ws://")
            .split(['/', ':'])
            .nth(1)
            .unwrap()
            .to_owned();
        let http = reqwest::Client::new();
        let targets: Vec<Value> = http
            .get(format!("http://127.0.0.1:{port}/json/list"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let page_ws = targets
            .iter()
            .find(|t| t["type"] == "page")
            .and_then(|t| t["webSocketDebuggerUrl"].as_str())
            .expect("chromium has a page target")
            .to_owned();
        let (ws, _) = tokio_tungstenite::connect_async(page_ws.as_str())
            .await
            .unwrap();
        let (mut sink, mut stream) = ws.split();
        let (out, mut out_rx) = mpsc::unbounded_channel::<Message>();
        tokio::spawn(async move {
            while let Some(m) = out_rx.recv().await {
                if sink.send(m).await.is_err() {
                    break;
                }
            }
        });
        let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
        let errors = Arc::new(Mutex::new(Vec::new()));
        let (p2, e2) = (pending.clone(), errors.clone());
        tokio::spawn(async move {
            while let Some(Ok(msg)) = stream.next().await {
                let Message::Text(text) = msg else { continue };
                let Ok(v) = serde_json::from_str::<Value>(&text) else {
                    continue;
                };
                if let Some(id) = v["id"].as_u64() {
                    if let Some(tx) = p2.lock().unwrap().remove(&id) {
                        let _ = tx.send(v);
                    }
                } else if v["method"] == "Runtime.exceptionThrown" {
                    e2.lock()
                        .unwrap()
                        .push(format!("exception: {}", v["params"]["exceptionDetails"]));
                } else if v["method"] == "Runtime.consoleAPICalled"
                    && v["params"]["type"] == "error"
                {
                    e2.lock()
                        .unwrap()
                        .push(format!("console.error: {}", v["params"]["args"]));
                }
            }
        });
        let b = Browser {
            child,
            out,
            pending,
            next: AtomicU64::new(1),
            errors,
            name: name.to_owned(),
            _profile: profile,
        };
        b.cmd("Runtime.enable", json!({})).await;
        b.cmd("Page.enable", json!({})).await;
        b.cmd("Network.enable", json!({})).await;
        b
    }

    /// Sends a CDP command and returns its `result` (panics on a protocol error).
    pub async fn cmd(&self, method: &str, params: Value) -> Value {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        let msg = json!({ "id": id, "method": method, "params": params }).to_string();
        self.out.send(Message::Text(msg.into())).unwrap();
        let v = tokio::time::timeout(DEADLINE, rx)
            .await
            .unwrap_or_else(|_| panic!("{method} timed out"))
            .unwrap();
        if let Some(e) = v.get("error") {
            panic!("{method} failed: {e}");
        }
        v["result"].clone()
    }

    /// Evaluates JavaScript in the page (promises awaited) and returns its value.
    pub async fn eval(&self, js: &str) -> Value {
        let r = self.cmd("Runtime.evaluate", json!({ "expression": js, "awaitPromise": true, "returnByValue": true, "userGesture": true })).await;
        if let Some(ex) = r.get("exceptionDetails") {
            panic!("script failed: {js}\n{ex}");
        }
        r["result"]["value"].clone()
    }

    /// Loads the URL afresh (through about:blank, so a change of the hash
    /// alone still reloads the page) and waits for the document to load.
    pub async fn goto(&self, url: &str) {
        self.cmd("Page.navigate", json!({ "url": "about:blank" }))
            .await;
        self.wait_for(
            "location.href === 'about:blank' && document.readyState === 'complete'",
            "about:blank",
        )
        .await;
        self.cmd("Page.navigate", json!({ "url": url })).await;
        self.wait_for(
            &format!(
                "location.href.startsWith({}) && document.readyState === 'complete'",
                json!(url.split('#').next().unwrap())
            ),
            "page loaded",
        )
        .await;
    }

    /// Waits until the expression is truthy; returns its value. On timeout,
    /// saves a screenshot and fails with `what`.
    pub async fn wait_for(&self, js: &str, what: &str) -> Value {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let r = self
                .cmd(
                    "Runtime.evaluate",
                    json!({ "expression": js, "returnByValue": true }),
                )
                .await;
            let v = r["result"]["value"].clone();
            let truthy = match &v {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy && r.get("exceptionDetails").is_none() {
                return v;
            }
            if tokio::time::Instant::now() > deadline {
                self.screenshot(&format!(
                    "timeout-{}",
                    what.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
                ))
                .await;
                panic!(
                    "timed out waiting for {what} ({js}); page errors: {:?}",
                    self.errors.lock().unwrap()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The centre of the first element matching `selector`, scrolled into view.
    async fn centre(&self, selector: &str) -> (f64, f64) {
        let js = format!(
            "(() => {{ const e = document.querySelector({s}); if (!e) return null; e.scrollIntoView({{block: 'center', inline: 'center'}}); const r = e.getBoundingClientRect(); return r.width && r.height ? [r.x + r.width / 2, r.y + r.height / 2] : null; }})()",
            s = json!(selector)
        );
        let v = self.wait_for(&js, &format!("visible {selector}")).await;
        (v[0].as_f64().unwrap(), v[1].as_f64().unwrap())
    }

    /// A real mouse click (pressed and released) at the element's centre.
    pub async fn click(&self, selector: &str) {
        let (x, y) = self.centre(selector).await;
        for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
            self.cmd(
                "Input.dispatchMouseEvent",
                json!({ "type": kind, "x": x, "y": y, "button": "left", "clickCount": 1 }),
            )
            .await;
        }
    }

    /// Focuses a field, selects its content and types text as keyboard input.
    pub async fn type_into(&self, selector: &str, text: &str) {
        self.click(selector).await;
        self.eval(&format!("(() => {{ const e = document.querySelector({}); e.focus(); e.select && e.select(); }})()", json!(selector))).await;
        self.cmd("Input.insertText", json!({ "text": text })).await;
    }

    /// Presses a key on the focused element (`Enter`, `Home`, `ArrowLeft`…).
    pub async fn press(&self, key: &str) {
        let code = match key {
            "Enter" => 13,
            "Home" => 36,
            "End" => 35,
            "ArrowLeft" => 37,
            "ArrowRight" => 39,
            "Escape" => 27,
            _ => 0,
        };
        let text = if key == "Enter" { "\r" } else { "" };
        self.cmd("Input.dispatchKeyEvent", json!({ "type": "keyDown", "key": key, "code": key, "windowsVirtualKeyCode": code, "text": text })).await;
        self.cmd(
            "Input.dispatchKeyEvent",
            json!({ "type": "keyUp", "key": key, "code": key, "windowsVirtualKeyCode": code }),
        )
        .await;
    }

    /// Sets files on an `<input type=file>` as the file chooser would.
    pub async fn set_files(&self, selector: &str, paths: &[PathBuf]) {
        let r = self
            .cmd(
                "Runtime.evaluate",
                json!({ "expression": format!("document.querySelector({})", json!(selector)) }),
            )
            .await;
        let object = r["result"]["objectId"]
            .as_str()
            .unwrap_or_else(|| panic!("no element {selector}"))
            .to_owned();
        let files: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        self.cmd(
            "DOM.setFileInputFiles",
            json!({ "files": files, "objectId": object }),
        )
        .await;
    }

    /// Drags files from outside the page onto an element and drops them there.
    pub async fn drop_files(&self, selector: &str, paths: &[PathBuf]) {
        let (x, y) = self.centre(selector).await;
        let files: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        let data = json!({ "items": [], "files": files, "dragOperationsMask": 1 });
        for kind in ["dragEnter", "dragOver", "drop"] {
            self.cmd(
                "Input.dispatchDragEvent",
                json!({ "type": kind, "x": x, "y": y, "data": data }),
            )
            .await;
        }
    }

    /// Saves a PNG of the viewport under target/browser-artifacts/.
    pub async fn screenshot(&self, step: &str) -> PathBuf {
        let r = self
            .cmd("Page.captureScreenshot", json!({ "format": "png" }))
            .await;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap_or(""))
            .unwrap_or_default();
        let path = artifacts_dir().join(format!("{}-{step}.png", self.name));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// Fails when the page threw or logged an error.
    pub fn assert_no_page_errors(&self) {
        let errors = self.errors.lock().unwrap();
        assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
    }

    /// Cookies the browser holds for `url`.
    pub async fn cookies(&self, url: &str) -> Vec<Value> {
        let r = self
            .cmd("Network.getCookies", json!({ "urls": [url] }))
            .await;
        r["cookies"].as_array().cloned().unwrap_or_default()
    }
}

/// Serves a two-page site on loopback until the test ends; returns its base URL.
pub async fn small_site() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let n = sock.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).to_string();
                let body = match head.split_whitespace().nth(1) {
                    Some("/") => "<html><body><nav><a href=\"/warranty\">保修</a></nav><main><h1>帮助中心</h1><p>欢迎来到斑马角书桌的帮助中心。</p></main></body></html>",
                    Some("/warranty") => "<html><body><main><h1>保修政策</h1><p>书桌的保修期为两年，自签收之日起计算。</p></main></body></html>",
                    _ => "",
                };
                let status = if body.is_empty() {
                    "404 Not Found"
                } else {
                    "200 OK"
                };
                let reply = format!("HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
                let _ = sock.write_all(reply.as_bytes()).await;
            });
        }
    });
    base
}
