//! Vectors stored beside a passage's vector: sentence vectors and the
//! second embedder's. Each is kept beside a passage vector of the same
//! text only, read by model (the second embedder's), never across
//! tenants, and dropped when the passage vector is stored again.

use super::*;

#[allow(clippy::too_many_arguments)]
pub(super) async fn check<S: Store>(
    store: &S,
    t: &mut Transcript,
    (a, b): (&TenantId, &TenantId),
    kb: &KnowledgeBase,
    (c0, c1, c2): (PassageId, PassageId, PassageId),
    f1: FaqId,
    space: &EmbeddingSpace,
    again: PassageVector,
) {
    let (a, b) = (a.clone(), b.clone());
    let sentences =
        |x: f32| SentenceVectors::quantise(&[vec![x, 1.0, 0.0], vec![0.0, -x, 2.0]]).unwrap();
    t.result(
        "put sentence vectors",
        &store
            .apply(
                &a,
                kb.id,
                vec![WriteOp::PutSentenceVectors(vec![
                    (c0, "h-0.5".into(), sentences(0.5)),
                    (c1, "another text".into(), sentences(2.0)),
                    (c2, "h--2.25".into(), sentences(-1.0)),
                ])],
            )
            .await,
    );
    let read_sentences = |tenant: TenantId, kb: KbId| async move {
        store
            .sentence_vectors(&tenant, kb, &[c0, c1, c2, PassageId::Faq(f1)])
            .await
            .map(|mut v| {
                v.sort_by_key(|(id, _)| *id);
                v.into_iter()
                    .map(|(id, s)| (id, s.to_bytes()))
                    .collect::<Vec<_>>()
            })
    };
    t.result("sentence vectors", &read_sentences(a.clone(), kb.id).await);
    t.result(
        "sentence vectors of another tenant's kb",
        &read_sentences(b.clone(), kb.id).await,
    );
    t.result(
        "put second vectors",
        &store
            .apply(
                &a,
                kb.id,
                vec![WriteOp::PutSecondVectors {
                    model: "second-1".into(),
                    items: vec![
                        (c0, "h-0.5".into(), sentences(0.25)),
                        (c1, "another text".into(), sentences(1.0)),
                        (c2, "h--2.25".into(), sentences(-0.5)),
                    ],
                }],
            )
            .await,
    );
    let read_second = |tenant: TenantId, kb: KbId, model: &'static str| async move {
        store
            .second_vectors(&tenant, kb, model, &[c0, c1, c2, PassageId::Faq(f1)])
            .await
            .map(|mut v| {
                v.sort_by_key(|(id, _)| *id);
                v.into_iter()
                    .map(|(id, s)| (id, s.to_bytes()))
                    .collect::<Vec<_>>()
            })
    };
    let second = read_second(a.clone(), kb.id, "second-1").await;
    assert_eq!(
        second.as_ref().map(|v| v.len()).ok(),
        Some(2),
        "second vectors stay only beside the vector of their text"
    );
    t.result("second vectors", &second);
    t.result(
        "second vectors of another model",
        &read_second(a.clone(), kb.id, "second-2").await,
    );
    t.result(
        "second vectors of another tenant's kb",
        &read_second(b.clone(), kb.id, "second-1").await,
    );
    t.result(
        "the passage vector again",
        &store
            .apply(
                &a,
                kb.id,
                vec![WriteOp::PutVectors {
                    space: space.clone(),
                    vectors: vec![again],
                }],
            )
            .await,
    );
    t.result(
        "sentence vectors after",
        &read_sentences(a.clone(), kb.id).await,
    );
    t.result(
        "second vectors after",
        &read_second(a.clone(), kb.id, "second-1").await,
    );
}
