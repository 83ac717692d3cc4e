//! Keyset pagination of the documents listing in the embedded store (the
//! property itself is in `paging/mod.rs`, shared with the PostgreSQL store).

mod paging;

#[test]
fn paging_lists_every_document_once_in_order_across_writes() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = rag_store::EmbeddedStore::open(dir.path(), rag_store::OpenMode::ReadWrite).unwrap();
    rt.block_on(paging::run(&store));
}
