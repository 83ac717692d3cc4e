//! The command line over a PostgreSQL store: `ragscope migrate` prepares the
//! schema as an administrator, then the ordinary commands run against it as
//! the application role, which row-level security confines to its tenant.
//! Needs the PostgreSQL that scripts/test starts (PG_TEST_URL);
//! built with `--features pg-tests`.
#![cfg(feature = "pg-tests")]

mod common;
use common::*;

/// A name no earlier run on the same server used.
fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

fn admin_url() -> String {
    std::env::var("PG_TEST_URL").unwrap_or_else(|_| {
        panic!("PG_TEST_URL is not set: start PostgreSQL with `export PG_TEST_URL=\"$(scripts/pg/start.sh)\"`")
    })
}

/// The application role's URL on the same server and database.
fn app_url(admin: &str) -> String {
    let rest = admin.split_once("://").map(|(_, r)| r).unwrap_or(admin);
    let host = rest.rsplit_once('@').map(|(_, h)| h).unwrap_or(rest);
    format!("postgres://{}:app-secret@{host}", rag_store_pg::APP_ROLE)
}

#[test]
fn migrate_then_ingest_and_query_through_postgres() {
    let admin = admin_url();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("unused-data");
    let pw = dir.path().join("app-password");
    std::fs::write(&pw, "app-secret\n").unwrap();
    let mut c = cmd(&data);
    c.args(["migrate", "--admin-url", &admin, "--app-password-file"])
        .arg(&pw);
    let r = ok(c);
    assert!(
        r.stdout
            .contains("set the password of the application role"),
        "{}",
        r.stdout
    );
    // Twice is fine.
    let mut c = cmd(&data);
    c.args(["migrate", "--admin-url", &admin]);
    assert!(ok(c).stdout.contains("the schema is current"));

    // The administrator is refused as the store: row-level security would protect nothing.
    let mut c = cmd(&data);
    c.args(["--store", &admin, "kb", "list"]);
    let r = run(c);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("PostgreSQL store"), "{}", r.stderr);

    let app = app_url(&admin);
    // A knowledge base name of its own, so reruns on the same server do not meet old data.
    let kb = unique("pg");
    let tenant = unique("t");
    let store = |c: &mut std::process::Command| {
        c.env("RAGSCOPE_STORE", &app)
            .env("RAGSCOPE_TENANT", &tenant)
            .env("RAGSCOPE_EMBEDDER__KIND", "none");
    };
    let mut c = cmd(&data);
    store(&mut c);
    c.args(["kb", "create", &kb]);
    ok(c);
    let mut c = cmd(&data);
    store(&mut c);
    c.arg("ingest")
        .arg("--kb")
        .arg(&kb)
        .arg(demo_dir().join("faq.jsonl"));
    ok(c);
    let mut c = cmd(&data);
    store(&mut c);
    c.args(["query", "--kb", &kb, "--json", "怎么申请退款"]);
    let r = ok(c);
    assert!(r.stdout.contains("退款"), "{}", r.stdout);
    // Nothing was written to the embedded data directory.
    assert!(!data.exists(), "the embedded store was not used");
    // Another tenant sees nothing of it.
    let mut c = cmd(&data);
    c.env("RAGSCOPE_STORE", &app)
        .env("RAGSCOPE_TENANT", format!("{tenant}-other"));
    c.args(["kb", "list"]);
    let r = ok(c);
    assert!(!r.stdout.contains(&kb), "{}", r.stdout);
    // The URL's password never appears in the printed configuration.
    let mut c = cmd(&data);
    c.env("RAGSCOPE_STORE", &app);
    c.arg("check-config");
    let r = ok(c);
    assert!(
        r.stdout.contains("***@") && !r.stdout.contains("app-secret"),
        "{}",
        r.stdout
    );
}

/// A runtime and an HTTP client for a test's calls to its servers.
fn http_runtime() -> (tokio::runtime::Runtime, reqwest::Client) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    (rt, reqwest::Client::new())
}

/// POSTs `body` as JSON.
async fn post(http: &reqwest::Client, url: String, body: serde_json::Value) -> reqwest::Response {
    http.post(url).json(&body).send().await.unwrap()
}

/// A `ragscope serve` child over the PostgreSQL store; killed when dropped.
struct Served {
    child: std::process::Child,
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(data: &std::path::Path, app: &str) -> Served {
    serve_store(data, Some(app))
}

/// A `ragscope serve` child over `app` (PostgreSQL), or over `data` (the
/// embedded store) when `None`.
fn serve_store(data: &std::path::Path, app: Option<&str>) -> Served {
    use std::io::BufRead;
    let mut c = cmd(data);
    if let Some(app) = app {
        c.env("RAGSCOPE_STORE", app);
    }
    c.env("RAGSCOPE_EMBEDDER__KIND", "none");
    c.args(["serve", "--open", "--addr", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = c.spawn().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let url = loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the server exited before listening"
        );
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
    };
    // Keep draining its stdout so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in out.lines() {});
    Served { child, url }
}

#[test]
fn two_servers_on_one_database_stay_consistent_and_survive_a_killed_writer() {
    let admin = admin_url();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("unused-data");
    let mut c = cmd(&data);
    c.args(["migrate", "--admin-url", &admin]);
    ok(c);
    let app = app_url(&admin);
    let (a, b) = (serve(&data, &app), serve(&data, &app));
    let kb = unique("two");
    let (rt, http) = http_runtime();
    let call = |server: &Served, method: reqwest::Method, path: String, body: serde_json::Value| {
        let req = http
            .request(method, format!("{}/api/v1{path}", server.url))
            .json(&body);
        rt.block_on(async move {
            let res = req.send().await.unwrap();
            let status = res.status().as_u16();
            (
                status,
                res.json::<serde_json::Value>()
                    .await
                    .unwrap_or(serde_json::Value::Null),
            )
        })
    };
    let post = reqwest::Method::POST;
    let (s, body) = call(
        &a,
        post.clone(),
        "/kbs".into(),
        serde_json::json!({ "name": kb }),
    );
    assert_eq!(s, 201, "{body}");
    // Written through A, read through B at once: B's indexes follow the
    // knowledge base's commit sequence, checked on every query.
    let (s, faq) = call(
        &a,
        post.clone(),
        format!("/kbs/{kb}/faqs"),
        serde_json::json!({ "question": "斑马角书桌保修多久？", "answer": "书桌保修两年。" }),
    );
    assert_eq!(s, 201, "{faq}");
    let ask = |server: &Served| {
        let (s, r) = call(
            server,
            reqwest::Method::POST,
            format!("/kbs/{kb}/query/sync"),
            serde_json::json!({ "query": "斑马角书桌保修多久" }),
        );
        assert_eq!(s, 200, "{r}");
        r.to_string()
    };
    assert!(ask(&b).contains("书桌保修两年"), "B sees A's entry");
    let id = faq["id"].as_str().unwrap();
    let (s, _) = call(
        &b,
        reqwest::Method::PATCH,
        format!("/kbs/{kb}/faqs/{id}"),
        serde_json::json!({ "answer": "书桌保修三年。" }),
    );
    assert_eq!(s, 200);
    let seen_by_a = ask(&a);
    assert!(
        seen_by_a.contains("书桌保修三年") && !seen_by_a.contains("书桌保修两年"),
        "A sees B's edit at once"
    );

    // A writer killed inside its transaction leaves nothing behind.
    let doc = dir.path().join("manual.md");
    std::fs::write(&doc, "# 说明书\n\n斑马角书桌的电机需要每年检查一次。\n").unwrap();
    let mut c = cmd(&data);
    c.env("RAGSCOPE_STORE", &app)
        .env("RAGSCOPE_EMBEDDER__KIND", "none")
        .env("RAGSCOPE_FAILPOINTS", "store.apply.before_commit=stall")
        .args(["ingest", "--kb", &kb])
        .arg(&doc)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut writer = c.spawn().unwrap();
    wait_for_stall(&mut writer, "store.apply.before_commit");
    writer.kill().unwrap();
    writer.wait().unwrap();
    // Killing a server does not disturb the other.
    drop(a);
    let (s, docs) = call(
        &b,
        reqwest::Method::GET,
        format!("/kbs/{kb}/documents"),
        serde_json::Value::Null,
    );
    assert_eq!(
        (s, docs["documents"].as_array().map(Vec::len)),
        (200, Some(0)),
        "no half-written document: {docs}"
    );
    assert!(ask(&b).contains("书桌保修三年"), "B keeps serving");
    // The same file goes in whole afterwards.
    let mut c = cmd(&data);
    c.env("RAGSCOPE_STORE", &app)
        .env("RAGSCOPE_EMBEDDER__KIND", "none")
        .args(["ingest", "--kb", &kb])
        .arg(&doc);
    ok(c);
    let (_, docs) = call(
        &b,
        reqwest::Method::GET,
        format!("/kbs/{kb}/documents"),
        serde_json::Value::Null,
    );
    assert_eq!(
        docs["documents"].as_array().map(Vec::len),
        Some(1),
        "{docs}"
    );
}

/// Migrates the test server, exports the demo of `dir` (with its vectors)
/// and imports it into PostgreSQL under a fresh tenant; returns the
/// application role's URL and the tenant.
fn demo_into_postgres(dir: &tempfile::TempDir, admin: &str, prefix: &str) -> (String, String) {
    let data = data_of(dir);
    let mut c = cmd(&data);
    c.args(["migrate", "--admin-url", admin]);
    ok(c);
    let file = dir.path().join("demo.jsonl");
    let mut c = cmd(&data);
    c.args(["export", "--kb", "demo", "--vectors", "--out"])
        .arg(&file);
    ok(c);
    let app = app_url(admin);
    let tenant = unique(prefix);
    let mut c = cmd(&data);
    c.env("RAGSCOPE_STORE", &app)
        .env("RAGSCOPE_TENANT", &tenant)
        .arg("import")
        .arg(&file);
    ok(c);
    (app, tenant)
}

#[test]
fn the_embedded_demo_moves_to_postgres_and_answers_the_same() {
    let admin = admin_url();
    let dir = demo_data();
    let data = data_of(&dir);
    let (app, tenant) = demo_into_postgres(&dir, &admin, "moved");
    let fused = |pg: bool, q: &str| {
        let mut c = cmd(&data);
        if pg {
            c.env("RAGSCOPE_STORE", &app)
                .env("RAGSCOPE_TENANT", &tenant);
        }
        c.args([
            "query",
            "--kb",
            "demo",
            "--json",
            "--paths",
            "bm25,substring,fuzzy,synonym,fact",
            q,
        ]);
        let r = ok(c);
        let events: Vec<serde_json::Value> = r
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let f = events
            .iter()
            .find(|e| e["type"] == "fused")
            .unwrap()
            .clone();
        f["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| (h["id"].clone(), h["score"].clone()))
            .collect::<Vec<_>>()
    };
    for q in [
        "怎么申请退款",
        "How do I reset my password?",
        "營業時間",
        "退宽",
    ] {
        let (embedded, postgres) = (fused(false, q), fused(true, q));
        assert!(!embedded.is_empty(), "{q}");
        assert_eq!(
            postgres, embedded,
            "{q}: the same ids and scores from both stores"
        );
    }
}

fn e5_model() -> std::path::PathBuf {
    let p = std::env::var_os("RAGSCOPE_MODELS_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models"))
        .join("e5-small-q4.bin");
    assert!(
        p.exists(),
        "{} is missing: run scripts/models/fetch-e5.sh",
        p.display()
    );
    p
}

/// Every path's list, per path: (path, [(id, score, matched)], notes).
type Lists = Vec<(
    String,
    Vec<(String, f64, serde_json::Value)>,
    serde_json::Value,
)>;

/// Recall inside PostgreSQL (BM25 over stored statistics, pg_trgm, pgvector)
/// ranks as the embedded store's in-memory indexes do: the same passages in
/// the same order with the same scores (to float rounding: PostgreSQL sums
/// in double precision), the same matched terms and notes.
#[test]
fn recall_in_postgres_ranks_as_the_embedded_indexes_do() {
    let admin = admin_url();
    let dir = demo_data();
    let data = data_of(&dir);
    let cache = dir.path().join("embedding-cache");
    let dictionary = e5_model().with_file_name("cedict_ts.u8");
    assert!(
        dictionary.exists(),
        "{} is missing: run scripts/models/fetch-cedict.sh",
        dictionary.display()
    );
    let with_e5 = |c: &mut std::process::Command| {
        c.env("RAGSCOPE_EMBEDDER__KIND", "e5")
            .env("RAGSCOPE_EMBEDDER__MODEL_PATH", e5_model())
            .env("RAGSCOPE_EMBEDDER__CACHE_DIR", &cache)
            .env("RAGSCOPE_DICTIONARY__KIND", "cedict")
            .env("RAGSCOPE_DICTIONARY__PATH", &dictionary);
    };
    let mut c = cmd(&data);
    with_e5(&mut c);
    c.args(["reembed", "--kb", "demo"]);
    ok(c);
    let (app, tenant) = demo_into_postgres(&dir, &admin, "recall");
    let lists = |pg: bool, q: &str, extra: &[&str]| -> Lists {
        let mut c = cmd(&data);
        with_e5(&mut c);
        if pg {
            c.env("RAGSCOPE_STORE", &app)
                .env("RAGSCOPE_TENANT", &tenant);
        }
        c.args([
            "query",
            "--kb",
            "demo",
            "--json",
            "--paths",
            "bm25,substring,fuzzy,synonym,fact,translated,dense",
        ])
        .args(extra)
        .arg(q);
        let r = ok(c);
        let mut out: Lists = r
            .stdout
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|e| e["type"] == "recall")
            .map(|e| {
                let l = &e["list"];
                let hits = l["hits"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|h| {
                        (
                            h["id"]["id"].as_str().unwrap().to_owned(),
                            h["score"].as_f64().unwrap(),
                            h["matched"].clone(),
                        )
                    })
                    .collect();
                (
                    l["path"].as_str().unwrap().to_owned(),
                    hits,
                    l["notes"].clone(),
                )
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    };
    let queries: &[(&str, &[&str])] = &[
        ("怎么申请退款", &[]),
        ("How do I reset my password?", &[]),
        ("營業時間", &[]),
        ("退宽", &[]),
        ("refnd my ordr", &[]),
        ("配送要多久", &["--tag", "配送"]),
        ("鱼有没有过敏原", &[]),
        ("delivery fee", &[]),
        // Across languages: the translated path over the English desk
        // guides, and over the Chinese FAQ and guides.
        ("蓝牙配对", &[]),
        ("child lock warranty", &[]),
    ];
    let (mut compared, mut fed_back, mut rescored, mut translated) = (0, 0, 0, 0);
    for (q, extra) in queries {
        let (embedded, postgres) = (lists(false, q, extra), lists(true, q, extra));
        let paths = |l: &Lists| l.iter().map(|p| p.0.clone()).collect::<Vec<_>>();
        assert_eq!(
            paths(&postgres),
            paths(&embedded),
            "{q}: every path ran on both stores"
        );
        assert!(
            paths(&embedded).contains(&"dense".to_owned()),
            "{q}: {:?}",
            paths(&embedded)
        );
        for ((path, want, want_notes), (_, got, got_notes)) in embedded.iter().zip(&postgres) {
            let ids = |l: &Vec<(String, f64, serde_json::Value)>| {
                l.iter().map(|h| h.0.clone()).collect::<Vec<_>>()
            };
            assert_eq!(
                ids(got),
                ids(want),
                "{q} {path}: the same passages in the same order"
            );
            for (w, g) in want.iter().zip(got) {
                assert!(
                    (w.1 - g.1).abs() <= 1e-4 * w.1.abs().max(1.0),
                    "{q} {path} {}: score {} vs {}",
                    w.0,
                    w.1,
                    g.1
                );
                assert_eq!(g.2, w.2, "{q} {path} {}: matched terms", w.0);
            }
            if path != "dense" {
                // The dense note names the index that answered, which differs.
                assert_eq!(got_notes, want_notes, "{q} {path}: notes");
            } else {
                // FAQ matching's feedback ran on both or neither.
                let fed = |notes: &serde_json::Value| notes.to_string().contains("searched again");
                assert_eq!(
                    fed(got_notes),
                    fed(want_notes),
                    "{q}: {got_notes} {want_notes}"
                );
                fed_back += usize::from(fed(want_notes));
                // Sentence vectors (moved over by export and import)
                // rescored the same candidates on both.
                let mixed = |notes: &serde_json::Value| {
                    notes
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|n| n.as_str())
                        .find(|n| n.contains("best sentence"))
                        .map(str::to_owned)
                };
                assert_eq!(mixed(got_notes), mixed(want_notes), "{q}: sentence notes");
                rescored += usize::from(mixed(want_notes).is_some());
            }
            if path == "translated" {
                translated += want.len();
            }
            compared += want.len();
        }
    }
    assert!(compared > 200, "only {compared} hits compared");
    assert!(
        translated > 0,
        "the translated path found nothing on either store"
    );
    assert!(fed_back > 0, "no query was matched against FAQ entries");
    assert!(rescored > 0, "no dense list was rescored by sentences");

    // The embedding map reads its passages and vectors by id from
    // PostgreSQL and from the in-memory indexes: the same points. (An open
    // server acts for the default tenant: a key of the import's tenant
    // reads its map.)
    let (rt, http) = http_runtime();
    let map = |server: &Served, key: Option<&str>| -> (String, Vec<String>) {
        rt.block_on(async {
            let mut req = http.get(format!("{}/api/v1/kbs/demo/map", server.url));
            if let Some(key) = key {
                req = req.bearer_auth(key);
            }
            let m: serde_json::Value = req.send().await.unwrap().json().await.unwrap();
            let mut ids: Vec<String> = m["points"]
                .as_array()
                .unwrap_or_else(|| panic!("{m}"))
                .iter()
                .map(|p| p["id"].to_string())
                .collect();
            ids.sort();
            (m["method"].as_str().unwrap().to_owned(), ids)
        })
    };
    let served = serve_store(&data, Some(&app));
    let key = rt.block_on(async {
        // The import wrote the tenant's rows; the key registry learns of it here.
        let url = format!("{}/api/v1/tenants", served.url);
        let res = post(&http, url, serde_json::json!({ "name": tenant })).await;
        assert!(res.status().is_success(), "{:?}", res.text().await);
        let url = format!("{}/api/v1/keys", served.url);
        let body = serde_json::json!({ "role": "read_only", "tenant": tenant });
        let created: serde_json::Value = post(&http, url, body).await.json().await.unwrap();
        created["key"]
            .as_str()
            .unwrap_or_else(|| panic!("{created}"))
            .to_owned()
    });
    let postgres = map(&served, Some(&key));
    drop(served);
    let embedded = map(&serve_store(&data, None), None);
    assert!(embedded.1.len() > 100, "{embedded:?}");
    assert_eq!(postgres, embedded, "the same points on the map");
}

/// What a test compares of a query's events: the language and tokens, each
/// path's passages as shown (titles, bodies, highlights), the packed
/// context, and the answer with its citations; scores and times are left
/// out (PostgreSQL sums in double precision).
fn shown(events: &[serde_json::Value]) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for e in events {
        match e["type"].as_str().unwrap_or_default() {
            "query_analyzed" => out.push(serde_json::json!([e["language"], e["tokens"]])),
            "recall" => out.push(serde_json::json!([e["list"]["path"], e["passages"]])),
            "context_assembled" => {
                let sources: Vec<_> = e["sources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| serde_json::json!([s["n"], s["passage"]]))
                    .collect();
                out.push(serde_json::json!(["context", sources, e["dropped"]]));
            }
            "answered" => out.push(serde_json::json!([
                e["text"],
                e["language"],
                e["kb_miss"],
                e["cited"],
                e["support"]
            ])),
            _ => {}
        }
    }
    // Paths finish in any order.
    out.sort_by_key(|v| v.to_string());
    out
}

/// An engine over PostgreSQL keeps no knowledge base's text (it reads the
/// head of each commit: facts, synonyms, dictionary, counts) and reads the
/// passages it shows by id; what a query shows and what "why not this
/// one?" says are the embedded store's.
#[test]
fn what_a_query_shows_from_postgres_is_what_the_embedded_store_shows() {
    let admin = admin_url();
    let dir = demo_data();
    let data = data_of(&dir);
    let (app, tenant) = demo_into_postgres(&dir, &admin, "shown");
    let query = |pg: bool, args: &[&str]| {
        let mut c = cmd(&data);
        if pg {
            c.env("RAGSCOPE_STORE", &app)
                .env("RAGSCOPE_TENANT", &tenant);
        }
        c.args(["--embedder", "none", "--log-level", "rag_engine=debug"])
            .args(["query", "--kb", "demo", "--json"])
            .args(["--paths", "bm25,substring,fuzzy,synonym,fact"])
            .args(args);
        ok(c)
    };
    let events = |out: &Run| -> Vec<serde_json::Value> {
        out.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    for q in [
        "怎么申请退款",
        "How do I reset my password?",
        "營業時間",
        "退宽",
        "配送要多久",
    ] {
        let (embedded, postgres) = (query(false, &[q]), query(true, &[q]));
        assert!(
            postgres.stderr.contains("read the head") && !postgres.stderr.contains("built indexes"),
            "{q}: the engine over PostgreSQL builds no text index: {}",
            postgres.stderr
        );
        let (want, got) = (shown(&events(&embedded)), shown(&events(&postgres)));
        assert!(
            want.iter().any(|v| v[0] == "context"),
            "{q}: a context was packed"
        );
        assert_eq!(
            got, want,
            "{q}: PostgreSQL shows what the embedded store shows"
        );
    }

    // "Why not?" for an entry some paths return and others do not: the
    // store scores the paths again, to every passage.
    let q = "怎么申请退款";
    let fused = events(&query(false, &[q]))
        .into_iter()
        .find(|e| e["type"] == "fused")
        .unwrap();
    let hits = fused["hits"].as_array().unwrap();
    let last = &hits[hits.len() - 1]["id"];
    let id = format!(
        "{}:{}",
        last["kind"].as_str().unwrap(),
        last["id"].as_str().unwrap()
    );
    let verdicts = |pg: bool| {
        let w: serde_json::Value =
            serde_json::from_str(query(pg, &[q, "--why-not", &id]).stdout.trim()).unwrap();
        let paths: Vec<_> = w["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| serde_json::json!([p["path"], p["status"], p["rank"], p["missing_terms"]]))
            .collect();
        (w["fused_rank"].clone(), paths)
    };
    let (want, got) = (verdicts(false), verdicts(true));
    assert!(
        want.1.iter().any(|p| p[1] != "returned"),
        "some path did not return {id}: {want:?}"
    );
    assert_eq!(
        got, want,
        "why not {id}: the same verdicts from both stores"
    );
}

/// The insights page's list of passages no logged question retrieved: over
/// PostgreSQL the store lists them (the server holds no passage), and it is
/// the embedded store's list.
#[test]
fn passages_never_retrieved_are_listed_by_postgres_as_by_the_embedded_store() {
    let admin = admin_url();
    let dir = demo_data();
    let data = data_of(&dir);
    let mut c = cmd(&data);
    c.args(["migrate", "--admin-url", &admin]);
    ok(c);
    let file = dir.path().join("demo.jsonl");
    let mut c = cmd(&data);
    c.args(["export", "--kb", "demo", "--out"]).arg(&file);
    ok(c);
    // Into the tenant an open server serves, under a name of its own.
    let app = app_url(&admin);
    let kb = unique("insights");
    let mut c = cmd(&data);
    c.env("RAGSCOPE_STORE", &app)
        .args(["import", "--as", &kb])
        .arg(&file);
    ok(c);
    let (rt, http) = http_runtime();
    let never = |server: &Served, kb: &str| {
        rt.block_on(async {
            for q in ["怎么申请退款", "营业时间"] {
                let url = format!("{}/api/v1/kbs/{kb}/query/sync", server.url);
                let res = post(&http, url, serde_json::json!({ "query": q })).await;
                assert_eq!(res.status().as_u16(), 200);
            }
            let a: serde_json::Value = http
                .get(format!("{}/api/v1/kbs/{kb}/analytics", server.url))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(a["queries"], 2, "{a}");
            let mut listed: Vec<(String, String)> = a["never_retrieved"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| (n["id"].to_string(), n["title"].as_str().unwrap().to_owned()))
                .collect();
            listed.sort();
            listed
        })
    };
    let postgres = {
        let server = serve_store(&data, Some(&app));
        never(&server, &kb)
    };
    let embedded = {
        let server = serve_store(&data, None);
        never(&server, "demo")
    };
    assert!(!embedded.is_empty() && embedded.iter().all(|(_, t)| !t.is_empty()));
    assert_eq!(postgres, embedded, "the same passages were never retrieved");
}
