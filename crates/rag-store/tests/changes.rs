//! The embedded store's change feed (`StoreRead::changes_since`): the
//! property over random writes, the retained window, stores from before the
//! log, and that one write costs one passage.

mod changefeed;

use changefeed::{check, commits, Ids};
use proptest::prelude::*;
use rag_core::*;
use rag_store::{EmbeddedStore, OpenMode};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn snapshot_then_changes_equals_the_snapshot_now() {
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path(), OpenMode::ReadWrite).unwrap();
    let tenant = TenantId::default_tenant();
    let n = std::sync::atomic::AtomicUsize::new(0);
    proptest!(ProptestConfig::with_cases(96), |(commits in commits(14))| {
        let name = format!("kb{}", n.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let result = rt.block_on(async {
            let kb = store.create_kb(&tenant, &name, KbSettings::default()).await.unwrap();
            check(&store, &tenant, &Ids::new(kb.id), &commits, true).await
        });
        prop_assert!(result.is_ok(), "{}", result.unwrap_err());
    });
    for (i, commits) in changefeed::scenarios().iter().enumerate() {
        let result = rt.block_on(async {
            let kb = store
                .create_kb(&tenant, &format!("scenario{i}"), KbSettings::default())
                .await
                .unwrap();
            check(&store, &tenant, &Ids::new(kb.id), commits, true).await
        });
        assert!(result.is_ok(), "scenario {i}: {}", result.unwrap_err());
    }
}

#[test]
fn changes_older_than_the_retained_log_are_unknown() {
    rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path(), OpenMode::ReadWrite).unwrap();
        store.set_change_log_retention(3);
        let tenant = TenantId::default_tenant();
        let kb = store
            .create_kb(&tenant, "kb", KbSettings::default())
            .await
            .unwrap()
            .id;
        let first = store.kb_seq(&tenant, kb).await.unwrap();
        let mut faqs = Vec::new();
        for i in 0..10 {
            let f = changefeed::small_faq(kb, &format!("q{i}"));
            faqs.push(f.id);
            store
                .apply(&tenant, kb, vec![WriteOp::PutFaq(f)])
                .await
                .unwrap();
        }
        let seq = store.kb_seq(&tenant, kb).await.unwrap();
        assert_eq!(seq, first + 10);
        // The last three commits are kept: since seq-3 is known, before is not.
        let kept = store
            .changes_since(&tenant, kb, seq - 3)
            .await
            .unwrap()
            .unwrap();
        let mut want: Vec<PassageId> = faqs[7..].iter().map(|&f| PassageId::Faq(f)).collect();
        want.sort();
        assert_eq!(kept.upserted.iter().map(|p| p.id).collect::<Vec<_>>(), want);
        for since in [first, seq - 4] {
            assert_eq!(store.changes_since(&tenant, kb, since).await.unwrap(), None);
        }
        // The pruned entries are gone from the table, not just hidden.
        drop(store);
        let c = rusqlite::Connection::open(dir.path().join("ragscope.sqlite3")).unwrap();
        let (rows, from): (i64, i64) = c
            .query_row(
                "SELECT (SELECT count(*) FROM kb_changes), (SELECT log_from FROM kbs)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((rows, from as u64), (3, seq - 3));
    });
}

#[test]
fn a_store_from_before_the_log_answers_from_its_migration_on() {
    let dir = tempfile::tempdir().unwrap();
    let tenant = TenantId::default_tenant();
    let kb = rt().block_on(async {
        let store = EmbeddedStore::open(dir.path(), OpenMode::ReadWrite).unwrap();
        let kb = store
            .create_kb(&tenant, "kb", KbSettings::default())
            .await
            .unwrap()
            .id;
        store
            .apply(
                &tenant,
                kb,
                vec![WriteOp::PutFaq(changefeed::small_faq(kb, "old"))],
            )
            .await
            .unwrap();
        kb
    });
    // Back to format 3: no log, no lower bound.
    {
        let c = rusqlite::Connection::open(dir.path().join("ragscope.sqlite3")).unwrap();
        c.execute_batch(
            "DROP TABLE kb_changes; ALTER TABLE kbs DROP COLUMN log_from;
             UPDATE meta SET value = '3' WHERE key = 'format_version';",
        )
        .unwrap();
    }
    // Read-only, unmigrated: nothing to tell.
    rt().block_on(async {
        let ro = EmbeddedStore::open(dir.path(), OpenMode::ReadOnly).unwrap();
        assert_eq!(ro.info().format_version, 3);
        assert_eq!(ro.changes_since(&tenant, kb, 2).await.unwrap(), None);
    });
    let store = EmbeddedStore::open(dir.path(), OpenMode::ReadWrite).unwrap();
    assert_eq!(store.info().format_version, rag_store::FORMAT_VERSION);
    rt().block_on(async {
        let seq = store.kb_seq(&tenant, kb).await.unwrap();
        assert_eq!(seq, 2);
        assert_eq!(store.changes_since(&tenant, kb, 1).await.unwrap(), None);
        let now = store.changes_since(&tenant, kb, 2).await.unwrap().unwrap();
        assert_eq!(
            now,
            KbChanges {
                seq: 2,
                ..Default::default()
            }
        );
        let f = changefeed::small_faq(kb, "new");
        store
            .apply(&tenant, kb, vec![WriteOp::PutFaq(f.clone())])
            .await
            .unwrap();
        let after = store.changes_since(&tenant, kb, 2).await.unwrap().unwrap();
        assert_eq!(after.upserted, vec![Passage::from(f)]);
        assert_eq!(store.changes_since(&tenant, kb, 1).await.unwrap(), None);
    });
}

#[test]
fn one_faq_write_in_a_thousand_documents_is_one_passage() {
    rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path(), OpenMode::ReadWrite).unwrap();
        let tenant = TenantId::default_tenant();
        let kb = store
            .create_kb(&tenant, "kb", KbSettings::default())
            .await
            .unwrap()
            .id;
        changefeed::one_faq_in_a_thousand_documents(&store, &tenant, kb).await;
    });
}

#[test]
fn another_tenant_gets_no_changes() {
    rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path(), OpenMode::ReadWrite).unwrap();
        let a = TenantId("a".into());
        let kb = store
            .create_kb(&a, "kb", KbSettings::default())
            .await
            .unwrap()
            .id;
        let err = store
            .changes_since(&TenantId("b".into()), kb, 1)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("unknown knowledge base"), "{err}");
    });
}
