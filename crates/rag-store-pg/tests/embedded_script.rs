//! The conformance script against the embedded store (no server needed):
//! keeps the script itself honest, and pins a few of its results.

use rag_store::conformance;

#[test]
fn the_script_runs_against_the_embedded_store() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = rag_store::EmbeddedStore::open(dir.path(), rag_store::OpenMode::ReadWrite).unwrap();
    let lines = rt.block_on(conformance::run(&store));
    let find = |label: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(&format!("{label}: ")))
            .unwrap_or_else(|| panic!("no line {label:?}"))
            .clone()
    };
    assert_eq!(
        find("create tenant a again"),
        "create tenant a again: \"Ok(false)\""
    );
    assert!(
        find("duplicate name").contains("already exists"),
        "{}",
        find("duplicate name")
    );
    assert!(
        find("b: snapshot of a's kb").contains("unknown knowledge base \\\"KB_A\\\""),
        "{}",
        find("b: snapshot of a's kb")
    );
    assert_eq!(
        find("log as Public"),
        "log as Public: [\"q5\", \"q2\", \"q1\"]"
    );
    assert_eq!(find("failed write"), "failed write: \"StoreError\"");
    // Sentence vectors beside the two passage vectors of the same text; one
    // left after the other passage vector was stored again.
    let chunks = |label: &str| find(label).matches("Chunk(").count();
    assert_eq!(
        chunks("sentence vectors"),
        2,
        "{}",
        find("sentence vectors")
    );
    assert_eq!(chunks("sentence vectors after"), 1);
    assert!(
        find("sentence vectors of another tenant's kb").contains("UserError"),
        "{}",
        find("sentence vectors of another tenant's kb")
    );
    // Passages read a page at a time end, whatever the page size.
    let pages = find("passages a page at a time: (page size, pages)");
    assert!(pages.contains("(1, "), "{pages}");
    eprintln!("{pages}");
    assert!(lines.len() > 90, "{}", lines.len());
}
