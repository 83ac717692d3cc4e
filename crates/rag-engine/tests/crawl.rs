//! URL sources against a small site served on loopback by the test: pages,
//! a redirect loop, a 404, a 20 MB page, a page that never answers, an
//! external link. Shows the limits, each page's status, and re-sync
//! behaviour: an unchanged site embeds nothing, a changed page is replaced, a
//! page that is gone or no longer linked loses its document.

use async_trait::async_trait;
use rag_core::{
    CoreError, Embedder, KbSettings, PageOutcome, Source, SourceStatus, TenantId, Viewer,
};
use rag_engine::{
    Components, Engine, EngineConfig, ExtractFailure, ExtractJob, Extractor, InProcessExtractor,
    NewSource,
};
use rag_ingest::Extraction;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What the site answers for a path.
#[derive(Clone)]
enum Reply {
    Page(&'static str, String),
    Redirect(&'static str),
    Status(u16),
    /// `n` bytes, streamed without a Content-Length.
    Huge(usize),
    /// Accepts the request and never answers.
    Hang,
}

type Site = Arc<Mutex<HashMap<String, Reply>>>;

async fn serve(site: Site) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let site = site.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf);
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let reply = site
                    .lock()
                    .unwrap()
                    .get(&path)
                    .cloned()
                    .unwrap_or(Reply::Status(404));
                let out = |status: &str, headers: &str, body: &[u8]| {
                    let mut v = format!("HTTP/1.1 {status}\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n", body.len()).into_bytes();
                    v.extend_from_slice(body);
                    v
                };
                match reply {
                    Reply::Page(ct, body) => {
                        let _ = sock
                            .write_all(&out(
                                "200 OK",
                                &format!("content-type: {ct}\r\n"),
                                body.as_bytes(),
                            ))
                            .await;
                    }
                    Reply::Redirect(to) => {
                        let _ = sock
                            .write_all(&out("302 Found", &format!("location: {to}\r\n"), b""))
                            .await;
                    }
                    Reply::Status(code) => {
                        let _ = sock
                            .write_all(&out(
                                &format!("{code} X"),
                                "content-type: text/plain\r\n",
                                b"no",
                            ))
                            .await;
                    }
                    Reply::Huge(n) => {
                        let _ = sock.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\nconnection: close\r\n\r\n").await;
                        let block = vec![b'a'; 64 * 1024];
                        let mut sent = 0;
                        while sent < n {
                            if sock.write_all(&block).await.is_err() {
                                return; // the client stopped reading at its limit
                            }
                            sent += block.len();
                        }
                    }
                    Reply::Hang => {
                        // Holds the connection until the client gives up.
                        let _ = sock.read(&mut chunk).await;
                    }
                }
            });
        }
    });
    base
}

fn html(title: &str, body: &str, links: &[&str]) -> Reply {
    let nav: String = links
        .iter()
        .map(|l| format!("<li><a href=\"{l}\">{l}</a></li>"))
        .collect();
    Reply::Page("text/html; charset=utf-8", format!("<!doctype html><html><head><title>{title}</title></head><body><nav><ul>{nav}</ul></nav><main><h1>{title}</h1><p>{body}</p></main></body></html>"))
}

/// Counts the texts it embeds (a deterministic toy vector: the embedder is not what is tested).
#[derive(Default)]
struct Counting(AtomicUsize);

#[async_trait]
impl Embedder for Counting {
    fn model_id(&self) -> &str {
        "counting-8"
    }
    fn dimensions(&self) -> usize {
        8
    }
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, CoreError> {
        Ok(toy(text))
    }
    async fn embed_documents(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, CoreError> {
        self.0.fetch_add(texts.len(), Ordering::SeqCst);
        Ok(texts.iter().map(|t| toy(t)).collect())
    }
}

fn toy(text: &str) -> Vec<f32> {
    let mut v = vec![0.1f32; 8];
    for (i, b) in text.bytes().enumerate() {
        v[i % 8] += b as f32 / 255.0;
    }
    v
}

/// The fetcher of these tests: short limits, private addresses allowed (the
/// test site is on loopback).
fn fetcher() -> rag_models::HttpFetcher {
    rag_models::HttpFetcher::new(rag_models::FetchConfig {
        timeout_ms: 1_500,
        max_bytes: 1024 * 1024,
        max_redirects: 4,
        allow_private: true,
        proxy: None,
    })
    .unwrap()
}

/// The site's root as a source of knowledge base "kb": depth 1, at most 20 pages.
async fn add_root(engine: &Engine, tenant: &TenantId, base: &str) -> Source {
    engine
        .add_source(
            tenant,
            "kb",
            NewSource {
                url: format!("{base}/"),
                depth: Some(1),
                max_pages: Some(20),
            },
            None,
        )
        .await
        .unwrap()
}

fn page<'a>(s: &'a Source, url: &str) -> &'a rag_core::SourcePage {
    s.pages
        .iter()
        .find(|p| p.url == url)
        .unwrap_or_else(|| panic!("no page {url} in {:#?}", s.pages))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_is_crawled_within_limits_and_re_synced_by_content_hash() {
    let site: Site = Arc::default();
    let base = serve(site.clone()).await;
    let links = [
        "/a",
        "/a#details",
        "/b.txt",
        "/loop",
        "/missing",
        "/huge",
        "/slow",
        "http://other.invalid/x",
    ];
    {
        let mut s = site.lock().unwrap();
        s.insert(
            "/".into(),
            html(
                "Help centre",
                "Welcome to the help centre of the zebracorn shop.",
                &links,
            ),
        );
        s.insert(
            "/a".into(),
            html(
                "Refunds",
                "Refunds reach the original payment method within three working days.",
                &["/", "/c"],
            ),
        );
        s.insert(
            "/c".into(),
            html("Deep page", "This page is two links deep.", &[]),
        );
        s.insert(
            "/b.txt".into(),
            Reply::Page(
                "text/plain; charset=utf-8",
                "Delivery takes two hours inside the city.".into(),
            ),
        );
        s.insert("/loop".into(), Reply::Redirect("/loop2"));
        s.insert("/loop2".into(), Reply::Redirect("/loop"));
        s.insert("/huge".into(), Reply::Huge(20 * 1024 * 1024));
        s.insert("/slow".into(), Reply::Hang);
    }
    let dir = tempfile::tempdir().unwrap();
    let store =
        rag_store::EmbeddedStore::open(&dir.path().join("data"), rag_store::OpenMode::ReadWrite)
            .unwrap();
    let counting = Arc::new(Counting::default());
    let mut components = Components::lexical(Arc::new(store));
    components.embedder = Some(counting.clone());
    components.fetcher = Some(Arc::new(fetcher()));
    let engine = Engine::new(components, EngineConfig::default());
    let tenant = TenantId::default_tenant();
    engine
        .create_kb(&tenant, "kb", KbSettings::default())
        .await
        .unwrap();
    let everyone = Viewer::Public;

    // Limits on what a source may ask for.
    let bad = engine
        .add_source(
            &tenant,
            "kb",
            NewSource {
                url: "ftp://x/".into(),
                ..Default::default()
            },
            None,
        )
        .await;
    assert!(
        bad.unwrap_err().to_string().contains("http"),
        "only http(s)"
    );
    let bad = engine
        .add_source(
            &tenant,
            "kb",
            NewSource {
                url: format!("{base}/"),
                depth: Some(99),
                ..Default::default()
            },
            None,
        )
        .await;
    assert!(bad.unwrap_err().to_string().contains("depth"));

    let source = add_root(&engine, &tenant, &base).await;
    assert_eq!(source.status, SourceStatus::Pending);
    let dup = engine
        .add_source(
            &tenant,
            "kb",
            NewSource {
                url: format!("{base}/#top"),
                ..Default::default()
            },
            None,
        )
        .await;
    assert!(dup.unwrap_err().to_string().contains("already a source"));

    // First sync.
    let mut seen = Vec::new();
    let s1 = engine
        .sync_source(&tenant, "kb", source.id, &everyone, &mut |p| {
            seen.push(p.url.clone())
        })
        .await
        .unwrap();
    assert_eq!(s1.status, SourceStatus::Synced, "{:?}", s1.reason);
    assert!(s1.last_sync.is_some());
    let u = |p: &str| format!("{base}{p}");
    assert_eq!(page(&s1, &u("/")).outcome, PageOutcome::Indexed);
    assert_eq!(page(&s1, &u("/a")).outcome, PageOutcome::Indexed);
    assert_eq!(page(&s1, &u("/b.txt")).outcome, PageOutcome::Indexed);
    let failed = |p: &str| {
        let pg = page(&s1, &u(p));
        assert_eq!(pg.outcome, PageOutcome::Failed, "{p}: {pg:?}");
        pg.reason.clone().unwrap()
    };
    assert!(failed("/loop").contains("redirects"));
    assert!(failed("/missing").contains("HTTP 404"));
    assert!(failed("/huge").contains("larger than the 1048576 byte limit"));
    assert!(failed("/slow").contains("within 1500 ms"));
    // The fragment is the same page, depth 1 stops before /c, other sites are not followed.
    assert_eq!(s1.pages.len(), 7, "{:#?}", s1.pages);
    assert!(s1.pages.iter().all(|p| !p.url.contains("/c")
        && !p.url.contains("other.invalid")
        && !p.url.contains('#')));
    assert_eq!(seen.len(), 7, "progress saw every page");
    let docs = engine.documents(&tenant, "kb", &everyone).await.unwrap();
    assert_eq!(docs.len(), 3);
    let (doc_root, doc_a) = (
        page(&s1, &u("/")).doc.unwrap(),
        page(&s1, &u("/a")).doc.unwrap(),
    );
    let (main, _) = engine
        .document(&tenant, "kb", doc_a, &everyone)
        .await
        .unwrap();
    assert!(
        main.text.contains("three working days") && !main.text.contains("/c"),
        "main text without navigation: {}",
        main.text
    );
    let embedded_first = counting.0.load(Ordering::SeqCst);
    assert!(embedded_first >= 3);
    // The status is stored.
    assert_eq!(
        engine
            .source(&tenant, "kb", source.id, &everyone)
            .await
            .unwrap(),
        s1
    );

    // Second sync of the unchanged site: nothing is extracted or embedded.
    let s2 = engine
        .sync_source(&tenant, "kb", source.id, &everyone, &mut |_| {})
        .await
        .unwrap();
    assert_eq!(
        counting.0.load(Ordering::SeqCst),
        embedded_first,
        "an unchanged site embeds nothing"
    );
    for p in ["/", "/a", "/b.txt"] {
        assert_eq!(page(&s2, &u(p)).outcome, PageOutcome::Unchanged, "{p}");
        assert_eq!(
            page(&s2, &u(p)).doc,
            page(&s1, &u(p)).doc,
            "{p} keeps its document"
        );
    }

    // A changed page is replaced (only it is embedded); a page gone is removed.
    {
        let mut s = site.lock().unwrap();
        s.insert(
            "/b.txt".into(),
            Reply::Page(
                "text/plain; charset=utf-8",
                "Delivery now takes one hour inside the city.".into(),
            ),
        );
        s.remove("/a");
    }
    let s3 = engine
        .sync_source(&tenant, "kb", source.id, &everyone, &mut |_| {})
        .await
        .unwrap();
    assert_eq!(
        counting.0.load(Ordering::SeqCst),
        embedded_first + 1,
        "only the changed page's one chunk is embedded"
    );
    assert_eq!(page(&s3, &u("/b.txt")).outcome, PageOutcome::Indexed);
    assert_ne!(page(&s3, &u("/b.txt")).doc, page(&s1, &u("/b.txt")).doc);
    assert_eq!(page(&s3, &u("/a")).outcome, PageOutcome::Removed);
    assert_eq!(page(&s3, &u("/")).doc, Some(doc_root));
    let docs = engine.documents(&tenant, "kb", &everyone).await.unwrap();
    assert_eq!(docs.len(), 2, "{docs:?}");
    assert!(engine
        .document(&tenant, "kb", doc_a, &everyone)
        .await
        .is_err());

    // A page no longer linked loses its document.
    site.lock().unwrap().insert(
        "/".into(),
        html(
            "Help centre",
            "Welcome to the new help centre.",
            &["/missing"],
        ),
    );
    let s4 = engine
        .sync_source(&tenant, "kb", source.id, &everyone, &mut |_| {})
        .await
        .unwrap();
    let gone = page(&s4, &u("/b.txt"));
    assert_eq!(
        (gone.outcome, gone.reason.as_deref()),
        (PageOutcome::Removed, Some("no longer linked"))
    );
    assert_eq!(
        engine
            .documents(&tenant, "kb", &everyone)
            .await
            .unwrap()
            .len(),
        1
    );

    // A start page that fails marks the source failed and keeps what was there.
    site.lock().unwrap().insert("/".into(), Reply::Status(503));
    let s5 = engine
        .sync_source(&tenant, "kb", source.id, &everyone, &mut |_| {})
        .await
        .unwrap();
    assert_eq!(s5.status, SourceStatus::Failed);
    assert!(
        s5.reason.as_deref().unwrap().contains("HTTP 503"),
        "{:?}",
        s5.reason
    );
    assert_eq!(
        engine
            .documents(&tenant, "kb", &everyone)
            .await
            .unwrap()
            .len(),
        1
    );

    // Deleting the source deletes its documents.
    engine
        .delete_source(&tenant, "kb", source.id, &everyone)
        .await
        .unwrap();
    assert!(engine
        .documents(&tenant, "kb", &everyone)
        .await
        .unwrap()
        .is_empty());
    assert!(engine
        .sources(&tenant, "kb", &everyone)
        .await
        .unwrap()
        .is_empty());
}

/// The crawler's extractor: extraction as usual, links from `links` (which
/// counts its calls), or a failure for every page when `fail` is set.
#[derive(Default)]
struct LinkExtractor {
    calls: AtomicUsize,
    fail: bool,
}

#[async_trait]
impl Extractor for LinkExtractor {
    async fn extract(&self, job: ExtractJob) -> Result<Extraction, ExtractFailure> {
        InProcessExtractor.extract(job).await
    }

    async fn links(&self, job: ExtractJob) -> Result<Vec<String>, ExtractFailure> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.fail {
            return Err(ExtractFailure {
                code: "parse_limit",
                reason: "stand-in: the link parser ran over its limit".into(),
            });
        }
        InProcessExtractor.links(job).await
    }
}

/// A page's links are outside bytes parsed by the engine's extractor (the
/// sandbox in servers), never in the engine's own process: the crawler asks
/// the extractor once per page it may follow links from, and a page whose
/// links cannot be read is still indexed, its links not followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_links_come_from_the_extractor() {
    let site: Site = Arc::default();
    let base = serve(site.clone()).await;
    {
        let mut s = site.lock().unwrap();
        s.insert(
            "/".into(),
            html("Home", "The zebracorn shop's help pages.", &["/a"]),
        );
        s.insert(
            "/a".into(),
            html("Refunds", "Refunds take three working days.", &["/b"]),
        );
        s.insert("/b".into(), html("Deep", "Two links deep.", &[]));
    }
    for fail in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let store = rag_store::EmbeddedStore::open(
            &dir.path().join("data"),
            rag_store::OpenMode::ReadWrite,
        )
        .unwrap();
        let extractor = Arc::new(LinkExtractor {
            fail,
            ..Default::default()
        });
        let mut components = Components::lexical(Arc::new(store));
        components.extractor = Some(extractor.clone());
        components.fetcher = Some(Arc::new(fetcher()));
        let engine = Engine::new(components, EngineConfig::default());
        let tenant = TenantId::default_tenant();
        engine
            .create_kb(&tenant, "kb", KbSettings::default())
            .await
            .unwrap();
        let source = add_root(&engine, &tenant, &base).await;
        let synced = engine
            .sync_source(&tenant, "kb", source.id, &Viewer::Public, &mut |_| {})
            .await
            .unwrap();
        assert_eq!(synced.status, SourceStatus::Synced, "{:?}", synced.reason);
        // Depth 1: links are read on the root page only.
        assert_eq!(extractor.calls.load(Ordering::SeqCst), 1, "fail={fail}");
        let urls: Vec<&str> = synced.pages.iter().map(|p| p.url.as_str()).collect();
        if fail {
            assert_eq!(urls, [format!("{base}/")], "no links followed");
        } else {
            assert_eq!(urls, [format!("{base}/"), format!("{base}/a")]);
        }
        assert_eq!(
            page(&synced, &format!("{base}/")).outcome,
            PageOutcome::Indexed
        );
    }
}
