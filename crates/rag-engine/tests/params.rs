//! Retrieval parameters merged once: a λ from the knowledge base's settings
//! is reported as coming from there, a request's as the request's, and a
//! run started from a logged run's parameters ranks as that run did after
//! the knowledge base's settings changed.

use rag_core::{
    KbSettings, PathKind, PipelineEvent, QueryRequest, RetrievalOverrides, RetrievalParams,
    TenantId,
};
use rag_engine::{Components, Engine, EngineConfig};
use std::sync::Arc;

async fn engine() -> (tempfile::TempDir, Engine, TenantId) {
    let dir = tempfile::tempdir().unwrap();
    let store = rag_store::EmbeddedStore::open(dir.path(), rag_store::OpenMode::ReadWrite).unwrap();
    let engine = Engine::new(
        Components::lexical(Arc::new(store)),
        EngineConfig::default(),
    );
    let tenant = TenantId::default_tenant();
    let mut settings = KbSettings::default();
    settings.retrieval.fusion.lexical_interpolation = Some(0.7);
    engine.create_kb(&tenant, "kb", settings).await.unwrap();
    let faqs = [
        r#"{"question": "怎么退款", "answer": "在订单页申请退款，七天内到账。"}"#,
        r#"{"question": "配送费多少", "answer": "满三十元免配送费，否则五元。"}"#,
        r#"{"question": "退款多久到账", "answer": "退款一般三到七天到账。"}"#,
        r#"{"question": "营业时间", "answer": "每天十点到次日两点。"}"#,
    ]
    .join("\n");
    engine
        .ingest(&tenant, "kb", "faq.jsonl", faqs.into_bytes())
        .await
        .unwrap();
    (dir, engine, tenant)
}

fn request(params: Option<RetrievalParams>, overrides: RetrievalOverrides) -> QueryRequest {
    QueryRequest {
        kb: "kb".into(),
        query: "退款到账".into(),
        params,
        overrides,
        filters: Default::default(),
        generate: false,
        conversation_id: None,
    }
}

fn fused(events: &[PipelineEvent]) -> (Option<f64>, String, Vec<String>) {
    events
        .iter()
        .find_map(|e| match e {
            PipelineEvent::Fused {
                lexical_interpolation,
                interpolation_reason,
                hits,
                ..
            } => Some((
                *lexical_interpolation,
                interpolation_reason.clone().unwrap_or_default(),
                hits.iter().map(|h| h.id.to_string()).collect(),
            )),
            _ => None,
        })
        .expect("a fused event")
}

#[tokio::test]
async fn lambda_provenance_and_replay_from_logged_params() {
    let (_dir, engine, tenant) = engine().await;
    let events = engine
        .query_collect(&tenant, request(None, Default::default()))
        .await;
    let (lambda, why, before) = fused(&events);
    assert_eq!(lambda, Some(0.7));
    assert_eq!(why, "set in the knowledge base's settings");

    let o = RetrievalOverrides {
        lexical_interpolation: Some(0.2),
        ..Default::default()
    };
    let (lambda, why, _) = fused(&engine.query_collect(&tenant, request(None, o)).await);
    assert_eq!(lambda, Some(0.2));
    assert_eq!(why, "set by the request");

    // The parameters the first run used, as its log row keeps them.
    let logged = engine.kb(&tenant, "kb").await.unwrap().settings.retrieval;
    // The knowledge base changes: other paths, other fusion.
    let mut changed = engine.kb(&tenant, "kb").await.unwrap().settings;
    changed.retrieval.paths = vec![PathKind::Substring];
    changed.retrieval.fusion.k = 1.0;
    changed.retrieval.per_path_k = 1;
    engine
        .update_kb_settings(&tenant, "kb", changed)
        .await
        .unwrap();
    let (_, _, now) = fused(
        &engine
            .query_collect(&tenant, request(None, Default::default()))
            .await,
    );
    assert_ne!(now, before, "the settings change must change the ranking");
    let (lambda, why, replayed) = fused(
        &engine
            .query_collect(&tenant, request(Some(logged), Default::default()))
            .await,
    );
    assert_eq!(replayed, before, "a replay ranks as the logged run did");
    assert_eq!(lambda, Some(0.7));
    assert!(why.contains("replay"), "{why}");
}
