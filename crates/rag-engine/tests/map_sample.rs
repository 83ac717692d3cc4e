//! The embedding map's passages: all of them up to the limit, above it a
//! fixed sample spread over the knowledge base, each with its stored
//! vector, and only what the viewer may see.

mod support;

use rag_core::{PassageId, Viewer};
use std::collections::HashMap;
use support::{engine, ingest_owned, stored};

/// The map's passages of "kb" for `viewer`, at most `limit`.
async fn map(
    engine: &rag_engine::Engine,
    tenant: &rag_core::TenantId,
    kb: &rag_core::KnowledgeBase,
    viewer: &Viewer,
    limit: usize,
) -> rag_engine::MapSample {
    engine.map_sample(tenant, kb, viewer, limit).await.unwrap()
}

#[tokio::test]
async fn the_map_reads_a_fixed_sample_of_what_the_viewer_may_see() {
    let faqs: Vec<String> = (0..300)
        .map(|i| format!(r#"{{"question": "question number {i}", "answer": "answer {i}"}}"#))
        .collect();
    let (_dir, engine, tenant) = engine(&[("faq.jsonl", faqs.join("\n"))]).await;
    ingest_owned(
        &engine,
        &tenant,
        "secret.md",
        "# Secret\n\nThe internal rules of refunds.",
        "alice",
    )
    .await;
    let vectors: HashMap<PassageId, Vec<f32>> =
        stored(&engine, &tenant).await.into_iter().collect();
    assert_eq!(vectors.len(), 301);
    let kb = engine.kb(&tenant, "kb").await.unwrap();

    // Below the limit: every passage the viewer may see, with its vector.
    let all = map(&engine, &tenant, &kb, &Viewer::Public, 1_000).await;
    assert_eq!(
        (all.visible, all.sampled, all.passages.len()),
        (300, false, 300)
    );
    assert_eq!(all.space.as_ref().unwrap().dims, 16);
    for (p, v) in &all.passages {
        assert_eq!(&vectors[&p.id], v, "the stored vector");
        assert!(p.owner.is_none(), "alice's document is hers only");
    }
    let alice = map(&engine, &tenant, &kb, &Viewer::Owner("alice".into()), 1_000).await;
    assert_eq!(alice.passages.len(), 301);

    // Above it: a sample of the limit's size, the same every time, part of
    // what the viewer sees.
    let some = map(&engine, &tenant, &kb, &Viewer::Public, 40).await;
    assert_eq!(
        (some.visible, some.sampled, some.passages.len()),
        (300, true, 40)
    );
    let again = map(&engine, &tenant, &kb, &Viewer::Public, 40).await;
    let ids = |s: &rag_engine::MapSample| s.passages.iter().map(|(p, _)| p.id).collect::<Vec<_>>();
    assert_eq!(ids(&some), ids(&again));
    let everyone: Vec<PassageId> = ids(&all);
    let at: Vec<usize> = ids(&some)
        .iter()
        .map(|id| {
            everyone
                .iter()
                .position(|x| x == id)
                .expect("a visible passage")
        })
        .collect();
    assert!(
        at.windows(2).all(|w| w[0] < w[1]),
        "in the knowledge base's order"
    );
    // Spread out: not the first 40.
    assert!(*at.last().unwrap() >= 200, "{at:?}");
    for (p, v) in &some.passages {
        assert_eq!(&vectors[&p.id], v);
        assert!(!p.body.is_empty(), "whole passages");
    }
}
