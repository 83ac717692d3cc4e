//! The second half of the conformance script: tenant isolation, keys, the
//! query log, and forgetting vectors and knowledge bases.

use super::*;

/// What the first half made that this half reads.
pub(super) struct Kbs<'a> {
    pub a: &'a TenantId,
    pub b: &'a TenantId,
    pub kb: &'a KnowledgeBase,
    pub other: &'a KnowledgeBase,
    pub kb_b: &'a KnowledgeBase,
    pub doc1: DocId,
}

pub(super) async fn run<S: Store + KeyStore>(
    store: &S,
    t: &mut Transcript,
    ids: &mut Ids,
    kbs: Kbs<'_>,
) {
    let Kbs {
        a,
        b,
        kb,
        other,
        kb_b,
        doc1,
    } = kbs;
    // Tenant isolation: b reaches nothing of a's by id.
    t.result(
        "b: snapshot of a's kb",
        &store.snapshot(b, kb.id).await.map(|s| s.passages.len()),
    );
    t.result("b: faqs of a's kb", &store.faqs(b, kb.id).await);
    t.result("b: seq of a's kb", &store.kb_seq(b, kb.id).await);
    t.result("b: documents of a's kb", &store.documents(b, kb.id).await);
    t.result(
        "b: document of a's kb",
        &store.document(b, kb.id, doc1).await,
    );
    t.result(
        "b: by hash in a's kb",
        &store.document_by_hash(b, kb.id, "hash-2", None).await,
    );
    t.result("b: sources of a's kb", &store.sources(b, kb.id).await);
    t.result("b: space of a's kb", &store.embedding_space(b, kb.id).await);
    t.result(
        "b: write to a's kb",
        &store
            .apply(
                b,
                kb.id,
                vec![WriteOp::PutFaq(faq(
                    ids,
                    kb.id,
                    "intruder",
                    "x",
                    FaqStatus::Approved,
                    1,
                ))],
            )
            .await,
    );
    t.result("b: delete a's kb", &store.delete_kb(b, kb.id).await);
    t.push("b: own snapshot", store.snapshot(b, kb_b.id).await.unwrap());
    for r in [
        store.snapshot(b, kb.id).await.is_err(),
        store.apply(b, kb.id, vec![]).await.is_err(),
        store.delete_kb(b, kb.id).await.is_err(),
    ] {
        assert!(r, "tenant b must not reach tenant a's knowledge base");
    }
    assert_eq!(
        store.faqs(a, kb.id).await.unwrap().len(),
        3,
        "two entries and the edited draft"
    );

    // Keys.
    let keys = [
        (key("k1", a, Role::Admin, None, None, 10), "hash-k1"),
        (
            key("k2", a, Role::ReadOnly, Some("alice"), Some("kb"), 11),
            "hash-k2",
        ),
        (key("k3", b, Role::ReadWrite, None, None, 10), "hash-k3"),
    ];
    for (k, h) in &keys {
        t.result(&format!("put key {}", k.id), &store.put_key(k, h).await);
    }
    t.push(
        "key by hash k2",
        store.key_by_hash("hash-k2").await.unwrap(),
    );
    t.push(
        "key by hash k3",
        store.key_by_hash("hash-k3").await.unwrap(),
    );
    t.push(
        "key by unknown hash",
        store.key_by_hash("nope").await.unwrap(),
    );
    t.push("keys of a", store.keys(Some(a)).await.unwrap());
    t.push("keys of b", store.keys(Some(b)).await.unwrap());
    t.push("all keys", store.keys(None).await.unwrap());
    t.push(
        "b revokes a's key",
        store.revoke_key(b, "k1").await.unwrap(),
    );
    t.push(
        "a revokes its key",
        store.revoke_key(a, "k1").await.unwrap(),
    );
    t.push(
        "revoked key by hash",
        store.key_by_hash("hash-k1").await.unwrap(),
    );

    // Query log with owners and conversations.
    for r in [
        logged(a, kb.id, "q1", "public first", Some("c1"), 10, None),
        logged(a, kb.id, "q2", "public miss", Some("c1"), 11, None),
        logged(
            a,
            kb.id,
            "q3",
            "alice private",
            Some("c2"),
            12,
            Some("alice"),
        ),
        logged(a, kb.id, "q4", "operator", None, 13, Some(OPERATOR_OWNER)),
        logged(a, kb.id, "q5", "same time", Some("c3"), 13, None),
        logged(a, other.id, "q6", "other kb", Some("c1"), 14, None),
        // Into another tenant's knowledge base: dropped.
        logged(b, kb.id, "q7", "cross-tenant", None, 15, None),
    ] {
        t.result(&format!("log {}", r.id), &store.log_query(&r).await);
    }
    for viewer in [
        Viewer::Public,
        Viewer::Owner("bob".into()),
        Viewer::Owner("alice".into()),
        Viewer::Everything,
    ] {
        let f = LogFilter {
            limit: 100,
            viewer: viewer.clone(),
            ..Default::default()
        };
        t.push(
            &format!("log as {viewer:?}"),
            store
                .query_log(a, kb.id, &f)
                .await
                .unwrap()
                .iter()
                .map(|r| r.id.clone())
                .collect::<Vec<_>>(),
        );
    }
    let filters = [
        LogFilter {
            limit: 100,
            viewer: Viewer::Everything,
            kb_miss: Some(true),
            ..Default::default()
        },
        LogFilter {
            limit: 100,
            viewer: Viewer::Everything,
            kb_miss: Some(false),
            ..Default::default()
        },
        LogFilter {
            limit: 100,
            viewer: Viewer::Everything,
            conversation_id: Some("c1".into()),
            ..Default::default()
        },
        LogFilter {
            limit: 100,
            viewer: Viewer::Everything,
            since: Some(12),
            ..Default::default()
        },
        LogFilter {
            limit: 2,
            viewer: Viewer::Everything,
            ..Default::default()
        },
        LogFilter {
            limit: 0,
            viewer: Viewer::Everything,
            ..Default::default()
        },
    ];
    for (i, f) in filters.iter().enumerate() {
        t.push(
            &format!("log filter {i}"),
            store
                .query_log(a, kb.id, f)
                .await
                .unwrap()
                .iter()
                .map(|r| r.id.clone())
                .collect::<Vec<_>>(),
        );
    }
    t.push(
        "log of b",
        store
            .query_log(
                b,
                kb_b.id,
                &LogFilter {
                    limit: 100,
                    viewer: Viewer::Everything,
                    ..Default::default()
                },
            )
            .await
            .unwrap(),
    );
    t.push(
        "log of a's kb as b",
        store
            .query_log(
                b,
                kb.id,
                &LogFilter {
                    limit: 100,
                    viewer: Viewer::Everything,
                    ..Default::default()
                },
            )
            .await
            .unwrap(),
    );
    t.push(
        "entry q1",
        store
            .query_log_entry(a, "q1", &Viewer::Public)
            .await
            .unwrap(),
    );
    t.push(
        "entry q3 as bob",
        store
            .query_log_entry(a, "q3", &Viewer::Owner("bob".into()))
            .await
            .unwrap(),
    );
    t.push(
        "entry q3 as alice",
        store
            .query_log_entry(a, "q3", &Viewer::Owner("alice".into()))
            .await
            .unwrap()
            .map(|r| r.query),
    );
    t.push(
        "entry q1 as b",
        store
            .query_log_entry(b, "q1", &Viewer::Everything)
            .await
            .unwrap(),
    );
    t.push(
        "feedback q3 public",
        store
            .set_feedback(a, "q3", &Viewer::Public, "useful")
            .await
            .unwrap(),
    );
    t.push(
        "feedback q3 alice",
        store
            .set_feedback(a, "q3", &Viewer::Owner("alice".into()), "useful")
            .await
            .unwrap(),
    );
    t.push(
        "feedback q1 as b",
        store
            .set_feedback(b, "q1", &Viewer::Everything, "not_useful")
            .await
            .unwrap(),
    );
    t.push(
        "entry q3 feedback",
        store
            .query_log_entry(a, "q3", &Viewer::Everything)
            .await
            .unwrap()
            .map(|r| r.feedback),
    );
    for viewer in [
        Viewer::Public,
        Viewer::Owner("alice".into()),
        Viewer::Everything,
    ] {
        t.push(
            &format!("conversations as {viewer:?}"),
            store.conversations(a, kb.id, &viewer, 10).await.unwrap(),
        );
    }
    t.push(
        "conversations, limit 1",
        store
            .conversations(a, kb.id, &Viewer::Everything, 1)
            .await
            .unwrap(),
    );
    t.push(
        "conversations as b",
        store
            .conversations(b, kb.id, &Viewer::Everything, 10)
            .await
            .unwrap(),
    );
    t.push(
        "b deletes c1",
        store
            .delete_conversation(b, kb.id, "c1", &Viewer::Everything)
            .await
            .unwrap(),
    );
    t.push(
        "bob deletes c2",
        store
            .delete_conversation(a, kb.id, "c2", &Viewer::Owner("bob".into()))
            .await
            .unwrap(),
    );
    t.push(
        "alice deletes c2",
        store
            .delete_conversation(a, kb.id, "c2", &Viewer::Owner("alice".into()))
            .await
            .unwrap(),
    );
    t.push(
        "public deletes c1",
        store
            .delete_conversation(a, kb.id, "c1", &Viewer::Public)
            .await
            .unwrap(),
    );
    t.push(
        "conversations after deletes",
        store
            .conversations(a, kb.id, &Viewer::Everything, 10)
            .await
            .unwrap(),
    );

    // Forgetting vectors, then the knowledge base.
    t.result(
        "clear vectors",
        &store.apply(a, kb.id, vec![WriteOp::ClearVectors]).await,
    );
    t.push("snapshot 3", store.snapshot(a, kb.id).await.unwrap());
    t.result("delete kb", &store.delete_kb(a, kb.id).await);
    t.result("deleted kb's seq", &store.kb_seq(a, kb.id).await);
    t.push(
        "kbs of a at the end",
        store
            .list_kbs(a)
            .await
            .unwrap()
            .iter()
            .map(kb_view)
            .collect::<Vec<_>>(),
    );
    t.push(
        "log entry of a deleted kb",
        store
            .query_log_entry(a, "q2", &Viewer::Everything)
            .await
            .unwrap(),
    );
    t.push(
        "log of the other kb",
        store
            .query_log(
                a,
                other.id,
                &LogFilter {
                    limit: 10,
                    viewer: Viewer::Everything,
                    ..Default::default()
                },
            )
            .await
            .unwrap()
            .len(),
    );
    t.push("b's kb untouched", store.kb_seq(b, kb_b.id).await.unwrap());
}
