//! Multi-vector passages: a document passage of several sentences gets a
//! vector per sentence (its title line first) beside its passage vector,
//! and the dense path scores its best candidates by 0.5 × passage cosine +
//! 0.5 × best sentence cosine. Checked against the same arithmetic done
//! here over the stored vectors; why-not ranks a cut passage the same way;
//! with sentence vectors off none are stored and passages rank by their
//! passage vector; `reembed` gives sentence vectors to passages stored
//! without them.

mod support;

use rag_core::{Filters, KbSnapshot, PassageId, SentenceVectors, TenantId};
use rag_engine::{Engine, EngineConfig};
use support::{assert_cut_by_k, assert_same, bag, dense_list, engine, engine_with, ranked, stored};

/// Three sentences per document. Half hold the question as a sentence of
/// its own among long unrelated ones; the others are made of the
/// question's letters throughout, so their passage vectors are closer.
fn files() -> Vec<(String, String)> {
    let filler = [
        "Quiet violet zebras jump over lazy wax in a moving cabin by the lake.",
        "Mixing xylophones quickly baffled jovial wizards of a big village.",
        "Grumpy wizards make toxic brew for the jovial queen of Kyoto.",
        "Sphinx of black quartz judge my vow with a hazy glow.",
    ];
    let close = [
        "Our funds rest in a status quo.",
        "Tuned rust farms endure dust.",
        "Stand under the refunded trust.",
        "Rude status of nerds.",
    ];
    (0..8)
        .map(|i| {
            let body = if i % 2 == 0 {
                format!(
                    "{} Refund status {i}. {}",
                    filler[i % 4],
                    filler[(i + 1) % 4]
                )
            } else {
                let c = |j: usize| close[(i + j) % 4].replace('.', &format!(" {i}."));
                format!("{} {} {}", c(0), c(1), c(2))
            };
            (format!("doc{i}.txt"), body)
        })
        .collect()
}

async fn snapshot(engine: &Engine, tenant: &TenantId) -> KbSnapshot {
    let kb = engine.kb(tenant, "kb").await.unwrap();
    engine.store().snapshot(tenant, kb.id).await.unwrap()
}

async fn sentences(
    engine: &Engine,
    tenant: &TenantId,
    ids: &[PassageId],
) -> Vec<(PassageId, SentenceVectors)> {
    let kb = engine.kb(tenant, "kb").await.unwrap();
    engine
        .store()
        .sentence_vectors(tenant, kb.id, ids)
        .await
        .unwrap()
}

/// Passages by the rescored mix, best first (ties by id).
fn mixed(
    question: &str,
    passages: &[(PassageId, Vec<f32>)],
    stored: &[(PassageId, SentenceVectors)],
) -> Vec<(PassageId, f32)> {
    let q = bag(question, false);
    let mut out: Vec<(PassageId, f32)> = ranked(&q, passages)
        .into_iter()
        .map(|(id, cos)| match stored.iter().find(|(s, _)| *s == id) {
            Some((_, s)) => (id, 0.5 * cos + 0.5 * s.best_cosine(&q).unwrap()),
            None => (id, cos),
        })
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

fn owned(files: &[(String, String)]) -> Vec<(&str, String)> {
    files.iter().map(|(n, b)| (n.as_str(), b.clone())).collect()
}

#[tokio::test]
async fn each_sentence_is_embedded_under_the_title_and_the_best_one_counts() {
    let files = files();
    let (_dir, engine, tenant) = engine(&owned(&files)).await;
    let all = stored(&engine, &tenant).await;
    assert_eq!(all.len(), 8);
    let ids: Vec<PassageId> = all.iter().map(|(id, _)| *id).collect();
    let held = sentences(&engine, &tenant, &ids).await;
    let snap0 = snapshot(&engine, &tenant).await;
    for p in &snap0.passages {
        eprintln!(
            "{:?} {:?} {}",
            p.title,
            p.body,
            held.iter().any(|(i, _)| *i == p.id)
        );
    }
    assert_eq!(held.len(), 8, "every passage has three sentences");
    // The vectors are those of "title\nsentence", sentence by sentence.
    let snap = snapshot(&engine, &tenant).await;
    for (id, s) in &held {
        assert_eq!(s.len(), 3);
        let p = snap.passages.iter().find(|p| p.id == *id).unwrap();
        for sentence in rag_answer::split_sentences(&p.body) {
            let text = format!("{}\n{}", p.title, sentence.text(&p.body));
            let best = s.best_cosine(&bag(&text, true)).unwrap();
            assert!(best > 0.995, "{text:?}: {best}");
        }
    }
    let question = "refund status";
    let list = dense_list(&engine, &tenant, question, Filters::default()).await;
    assert!(
        list.notes.iter().any(|n| n.contains("best sentence")),
        "{:?}",
        list.notes
    );
    let want = mixed(question, &all, &held);
    assert_same(&list, &want);
    // The passage vectors alone would have ranked otherwise.
    let plain = ranked(&bag(question, false), &all);
    assert!(
        want.iter().zip(&plain).any(|(a, b)| a.0 != b.0),
        "the fixture no longer tests anything"
    );
}

#[tokio::test]
async fn why_not_ranks_a_cut_passage_by_the_same_mix() {
    let files = files();
    let (_dir, engine, tenant) = engine(&owned(&files)).await;
    let all = stored(&engine, &tenant).await;
    let ids: Vec<PassageId> = all.iter().map(|(id, _)| *id).collect();
    let held = sentences(&engine, &tenant, &ids).await;
    let question = "refund status";
    let want = mixed(question, &all, &held);
    let (id, score) = want[5];
    assert_cut_by_k(&engine, &tenant, question, 2, (id, 6, score)).await;
}

#[tokio::test]
async fn turned_off_nothing_is_stored_and_passages_rank_by_their_vector() {
    let files = files();
    let off = EngineConfig {
        sentence_vectors: false,
        ..EngineConfig::default()
    };
    let (_dir, engine, tenant) = engine_with(&owned(&files), off).await;
    let all = stored(&engine, &tenant).await;
    let ids: Vec<PassageId> = all.iter().map(|(id, _)| *id).collect();
    assert!(sentences(&engine, &tenant, &ids).await.is_empty());
    let question = "refund status";
    let list = dense_list(&engine, &tenant, question, Filters::default()).await;
    assert!(list.notes.iter().all(|n| !n.contains("best sentence")));
    assert_same(&list, &ranked(&bag(question, false), &all));
}

#[tokio::test]
async fn reembed_adds_sentence_vectors_to_passages_stored_without_them() {
    let files = files();
    let off = EngineConfig {
        sentence_vectors: false,
        ..EngineConfig::default()
    };
    let (dir, engine, tenant) = engine_with(&owned(&files), off).await;
    let ids: Vec<PassageId> = stored(&engine, &tenant)
        .await
        .iter()
        .map(|(id, _)| *id)
        .collect();
    drop(engine);
    // The same store, now with sentence vectors on.
    let store = rag_store::EmbeddedStore::open(dir.path(), rag_store::OpenMode::ReadWrite).unwrap();
    let mut components = rag_engine::Components::lexical(std::sync::Arc::new(store));
    components.embedder = Some(std::sync::Arc::new(support::TwoForms));
    let engine = Engine::new(components, EngineConfig::default());
    let report = engine.reembed(&tenant, "kb", |_, _| {}).await.unwrap();
    assert_eq!(report.needed, 0, "every passage vector was current");
    assert_eq!(report.sentences_added, 8);
    assert_eq!(sentences(&engine, &tenant, &ids).await.len(), 8);
    // Done once: a second run finds nothing to add.
    let again = engine.reembed(&tenant, "kb", |_, _| {}).await.unwrap();
    assert_eq!(again.sentences_added, 0);
}
