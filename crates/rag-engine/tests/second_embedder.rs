//! The second, English-only embedder: its vectors are stored beside the
//! first's for English passages (on ingest, FAQ writes and `reembed`), and
//! after recall it scores every candidate the other paths found for an
//! English question, as the `second_dense` list that shares the dense
//! weight. Checked against the same arithmetic done here over the stand-in
//! embedder's vectors; a Chinese question, or a Chinese candidate, leaves
//! it out with a note; export and import carry its vectors.

mod support;

use async_trait::async_trait;
use rag_core::{
    CoreError, Embedder, KbSettings, PassageId, PathKind, PipelineEvent, QueryRequest,
    RetrievalParams, SentenceVectors, TenantId, Viewer,
};
use rag_engine::{Components, Engine, EngineConfig, NewFaq, PipelineOutput, QueryOptions};
use std::sync::Arc;
use support::{dot, TwoForms};

/// A second stand-in: letters hashed into 8 dimensions, one form for
/// questions and passages (as MiniLM has).
struct Letters;

fn letters(text: &str) -> Vec<f32> {
    let mut v = vec![0.1f32; 8];
    for c in text.chars().filter(|c| c.is_alphanumeric()) {
        v[c as usize % 8] += 1.0;
    }
    support::unit(v)
}

#[async_trait]
impl Embedder for Letters {
    fn model_id(&self) -> &str {
        "test/letters-8"
    }
    fn dimensions(&self) -> usize {
        8
    }
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, CoreError> {
        Ok(letters(text))
    }
    async fn embed_documents(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, CoreError> {
        Ok(texts.iter().map(|t| letters(t)).collect())
    }
}

/// Letters for passages, but every question fails (a broken model).
struct FailsOnQuestions;

#[async_trait]
impl Embedder for FailsOnQuestions {
    fn model_id(&self) -> &str {
        "test/letters-8"
    }
    fn dimensions(&self) -> usize {
        8
    }
    async fn embed_query(&self, _: &str) -> Result<Vec<f32>, CoreError> {
        Err(CoreError::Component {
            component: "embedder".into(),
            message: "the model failed".into(),
        })
    }
    async fn embed_documents(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, CoreError> {
        Letters.embed_documents(texts).await
    }
}

fn engine_over(dir: &std::path::Path, second: bool) -> Engine {
    engine_with_second(dir, second.then(|| Arc::new(Letters) as Arc<dyn Embedder>))
}

fn engine_with_second(dir: &std::path::Path, second: Option<Arc<dyn Embedder>>) -> Engine {
    let store = rag_store::EmbeddedStore::open(dir, rag_store::OpenMode::ReadWrite).unwrap();
    let mut components = Components::lexical(Arc::new(store));
    components.embedder = Some(Arc::new(TwoForms));
    components.second_embedder = second;
    Engine::new(components, EngineConfig::default())
}

const DOCS: [(&str, &str); 4] = [
    (
        "refunds.txt",
        "Refunds reach your card in five days. Call us if a refund is late.",
    ),
    (
        "cards.txt",
        "A lost card is blocked at once. A new card arrives within a week.",
    ),
    (
        "transfers.txt",
        "Transfers abroad take two days. Fees depend on the currency.",
    ),
    (
        "pins.txt",
        "Your PIN can be changed at any cash machine. Forgotten PINs are sent by post.",
    ),
];

async fn setup(second: bool) -> (tempfile::TempDir, Engine, TenantId) {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_over(dir.path(), second);
    let tenant = TenantId::default_tenant();
    engine
        .create_kb(&tenant, "kb", KbSettings::default())
        .await
        .unwrap();
    for (name, body) in DOCS {
        engine
            .ingest(&tenant, "kb", name, body.as_bytes().to_vec())
            .await
            .unwrap();
    }
    engine
        .create_faq(
            &tenant,
            "kb",
            NewFaq {
                question: "How do I get my money back?".into(),
                answer: "Ask for a refund in the app.".into(),
                tags: vec![],
                source_url: None,
                status: None,
                valid_from: None,
                valid_until: None,
            },
        )
        .await
        .unwrap();
    (dir, engine, tenant)
}

async fn ask(engine: &Engine, tenant: &TenantId, q: &str) -> (PipelineOutput, Vec<PipelineEvent>) {
    let request = QueryRequest {
        kb: "kb".into(),
        query: q.into(),
        params: Some(RetrievalParams::default()),
        overrides: Default::default(),
        filters: Default::default(),
        generate: false,
        conversation_id: None,
    };
    let options = QueryOptions {
        views: false,
        log: false,
        viewer: Viewer::Everything,
    };
    let mut events = Vec::new();
    let out = engine
        .run(tenant, request, options, &mut |e| events.push(e))
        .await
        .unwrap();
    (out, events)
}

async fn second_vectors(
    engine: &Engine,
    tenant: &TenantId,
    ids: &[PassageId],
) -> Vec<(PassageId, SentenceVectors)> {
    let kb = engine.kb(tenant, "kb").await.unwrap();
    engine
        .store()
        .second_vectors(tenant, kb.id, "test/letters-8", ids)
        .await
        .unwrap()
}

#[tokio::test]
async fn an_english_question_gets_the_second_opinion_of_every_candidate() {
    let (_dir, engine, tenant) = setup(true).await;
    let q = "when will my refund arrive";
    let (out, events) = ask(&engine, &tenant, q).await;
    let second = out
        .lists
        .iter()
        .find(|l| l.path == PathKind::SecondDense)
        .expect("a second_dense list");
    // Every candidate of the other paths, each once.
    let mut candidates: Vec<PassageId> = out
        .lists
        .iter()
        .filter(|l| l.path != PathKind::SecondDense)
        .flat_map(|l| l.hits.iter().map(|h| h.id))
        .collect();
    candidates.sort();
    candidates.dedup();
    let mut got: Vec<PassageId> = second.hits.iter().map(|h| h.id).collect();
    got.sort();
    assert_eq!(got, candidates);
    // Scored as the module says: passages mix the whole text's cosine with
    // their best sentence's, the FAQ entry takes the better of its rows.
    let stored = second_vectors(&engine, &tenant, &candidates).await;
    assert_eq!(stored.len(), candidates.len());
    let query = letters(q);
    for hit in &second.hits {
        let rows = &stored.iter().find(|(id, _)| *id == hit.id).unwrap().1;
        let cos = rows.cosines(&query).unwrap();
        let want = match hit.id {
            PassageId::Faq(_) => {
                assert_eq!(rows.len(), 2, "an FAQ entry: the entry, then its question");
                cos[0].max(cos[1])
            }
            _ if cos.len() > 1 => {
                0.5 * cos[0] + 0.5 * cos[1..].iter().copied().fold(f32::MIN, f32::max)
            }
            _ => cos[0],
        };
        assert!((hit.score - f64::from(want)).abs() < 1e-6, "{hit:?} {want}");
    }
    assert!(second.hits.windows(2).all(|w| w[0].score >= w[1].score));
    // The stored int8 rows are the stand-in's vectors of the texts.
    let faq = stored
        .iter()
        .find(|(id, _)| matches!(id, PassageId::Faq(_)))
        .unwrap();
    let asked = letters("How do I get my money back?");
    let cos = faq.1.cosines(&asked).unwrap();
    assert!((cos[1] - dot(&asked, &asked)).abs() < 2e-2, "{cos:?}");
    // Fusion gave it a share of the dense weight, and said why λ moved.
    let fused = events
        .iter()
        .find_map(|e| match e {
            PipelineEvent::Fused {
                lexical_interpolation,
                interpolation_reason,
                hits,
                ..
            } => Some((*lexical_interpolation, interpolation_reason.clone(), hits)),
            _ => None,
        })
        .unwrap();
    assert_eq!(fused.0, Some(0.4));
    assert!(fused.1.unwrap().contains("second embedder"));
    let weights: Vec<(PathKind, f64)> = fused.2[0]
        .contributions
        .iter()
        .filter(|c| c.path.is_dense())
        .map(|c| (c.path, c.weight))
        .collect();
    assert!(
        weights.contains(&(PathKind::SecondDense, 0.3)),
        "{weights:?}"
    );
}

#[tokio::test]
async fn a_chinese_question_or_candidate_leaves_it_out() {
    let (_dir, engine, tenant) = setup(true).await;
    let (out, _) = ask(&engine, &tenant, "退款什么时候到账").await;
    assert!(out.lists.iter().all(|l| l.path != PathKind::SecondDense));
    // A Chinese passage has no second vectors: an English question whose
    // candidates include it is fused without the second list.
    engine
        .ingest(
            &tenant,
            "kb",
            "zh.txt",
            "退款会在五个工作日内退回到您的银行卡。如有延迟请联系客服。"
                .as_bytes()
                .to_vec(),
        )
        .await
        .unwrap();
    let (out, events) = ask(&engine, &tenant, "when will my refund arrive").await;
    let second = out
        .lists
        .iter()
        .find(|l| l.path == PathKind::SecondDense)
        .expect("the list, empty, with its note");
    assert!(second.hits.is_empty());
    assert!(second.notes[0].contains("1 of the"), "{:?}", second.notes);
    let lambda = events.iter().find_map(|e| match e {
        PipelineEvent::Fused {
            lexical_interpolation,
            ..
        } => Some(*lexical_interpolation),
        _ => None,
    });
    assert_eq!(lambda, Some(Some(0.6)));
}

#[tokio::test]
async fn reembed_adds_them_and_export_and_import_carry_them() {
    // Stored without a second embedder.
    let (dir, engine, tenant) = setup(false).await;
    let kb = engine.kb(&tenant, "kb").await.unwrap();
    let snapshot = engine.store().snapshot(&tenant, kb.id).await.unwrap();
    let ids: Vec<PassageId> = snapshot.passages.iter().map(|p| p.id).collect();
    assert!(second_vectors(&engine, &tenant, &ids).await.is_empty());
    drop(engine);
    // Configured now: reembed gives every current passage its second vectors.
    let engine = engine_over(dir.path(), true);
    let report = engine.reembed(&tenant, "kb", |_, _| {}).await.unwrap();
    assert_eq!(report.needed, 0);
    assert_eq!(report.second_added, ids.len());
    let stored = second_vectors(&engine, &tenant, &ids).await;
    assert_eq!(stored.len(), ids.len());
    let again = engine.reembed(&tenant, "kb", |_, _| {}).await.unwrap();
    assert_eq!(again.second_added, 0);
    let (out, _) = ask(&engine, &tenant, "when will my refund arrive").await;
    assert!(out
        .lists
        .iter()
        .any(|l| l.path == PathKind::SecondDense && !l.hits.is_empty()));

    // Export, then import as another knowledge base with the same ids.
    let mut lines = Vec::new();
    engine
        .export_kb(&tenant, "kb", true, &mut |l| {
            lines.push(l.clone());
            Ok(())
        })
        .await
        .unwrap();
    engine.delete_kb(&tenant, "kb").await.unwrap();
    let mut it = lines.into_iter().map(Ok);
    engine
        .import_kb(&tenant, &mut it, Some("kb"), false)
        .await
        .unwrap();
    let mut back = second_vectors(&engine, &tenant, &ids).await;
    let mut want = stored;
    back.sort_by_key(|(id, _)| *id);
    want.sort_by_key(|(id, _)| *id);
    assert_eq!(back, want);
    // An edited FAQ entry gets the vectors of its new text.
    let faq = ids
        .iter()
        .find_map(|id| match id {
            PassageId::Faq(f) => Some(*f),
            _ => None,
        })
        .unwrap();
    engine
        .update_faq(
            &tenant,
            "kb",
            faq,
            rag_engine::FaqPatch {
                question: Some("Where is my refund?".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let rows = second_vectors(&engine, &tenant, &[PassageId::Faq(faq)]).await;
    let q = letters("Where is my refund?");
    let cos = rows[0].1.cosines(&q).unwrap();
    assert!((cos[1] - 1.0).abs() < 2e-2, "{cos:?}");
}

#[tokio::test]
async fn a_failing_second_model_fails_soft() {
    let (dir, engine, tenant) = setup(true).await;
    let (before, _) = ask(&engine, &tenant, "when will my refund arrive").await;
    drop(engine);
    let engine = engine_with_second(dir.path(), Some(Arc::new(FailsOnQuestions)));
    let (out, events) = ask(&engine, &tenant, "when will my refund arrive").await;
    assert!(out.lists.iter().all(|l| l.path != PathKind::SecondDense));
    assert!(events.iter().any(|e| matches!(
        e,
        PipelineEvent::RecallFailed { path: PathKind::SecondDense, message } if message.contains("the model failed")
    )));
    // Fused as without it: the same lists but the second one.
    let others: Vec<_> = before
        .lists
        .iter()
        .filter(|l| l.path != PathKind::SecondDense)
        .map(|l| (l.path, l.hits.iter().map(|h| h.id).collect::<Vec<_>>()))
        .collect();
    let got: Vec<_> = out
        .lists
        .iter()
        .map(|l| (l.path, l.hits.iter().map(|h| h.id).collect::<Vec<_>>()))
        .collect();
    assert_eq!(got, others);
    assert!(!out.fused.hits.is_empty());
}
