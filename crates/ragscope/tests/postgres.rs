//! The command line over a PostgreSQL store: `ragscope migrate` prepares the
//! schema as an administrator, then the ordinary commands run against it as
//! the application role, which row-level security confines to its tenant.
//! Needs the PostgreSQL that scripts/test starts (RAGSCOPE_TEST_PG_URL);
//! built with `--features pg-tests`.
#![cfg(feature = "pg-tests")]

mod common;
use common::*;

fn admin_url() -> String {
    std::env::var("RAGSCOPE_TEST_PG_URL").unwrap_or_else(|_| {
        panic!("RAGSCOPE_TEST_PG_URL is not set: start PostgreSQL with `export RAGSCOPE_TEST_PG_URL=\"$(scripts/pg/start.sh)\"`")
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
    c.args(["migrate", "--admin-url", &admin, "--app-password-file"]).arg(&pw);
    let r = ok(c);
    assert!(r.stdout.contains("set the password of the application role"), "{}", r.stdout);
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
    let kb = format!("pg-{}", std::process::id());
    let tenant = format!("t{}", std::process::id());
    let store = |c: &mut std::process::Command| {
        c.env("RAGSCOPE_STORE", &app).env("RAGSCOPE_TENANT", &tenant).env("RAGSCOPE_EMBEDDER__KIND", "none");
    };
    let mut c = cmd(&data);
    store(&mut c);
    c.args(["kb", "create", &kb]);
    ok(c);
    let mut c = cmd(&data);
    store(&mut c);
    c.arg("ingest").arg("--kb").arg(&kb).arg(demo_dir().join("faq.jsonl"));
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
    c.env("RAGSCOPE_STORE", &app).env("RAGSCOPE_TENANT", format!("{tenant}-other"));
    c.args(["kb", "list"]);
    let r = ok(c);
    assert!(!r.stdout.contains(&kb), "{}", r.stdout);
    // The URL's password never appears in the printed configuration.
    let mut c = cmd(&data);
    c.env("RAGSCOPE_STORE", &app);
    c.arg("check-config");
    let r = ok(c);
    assert!(r.stdout.contains("<redacted>") && !r.stdout.contains("app-secret"), "{}", r.stdout);
}
