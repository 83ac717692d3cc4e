//! "Why not this one?": an entry cut by the per-path k reports its true
//! rank, a filtered-out entry names the filter, missing query terms are
//! named, and an entry the caller may not see is not found.

use rag_core::{
    CoreError, Filters, KbSettings, PathKind, QueryRequest, RetrievalOverrides, TenantId,
    UserError, Viewer,
};
use rag_engine::{Components, Engine, EngineConfig, WhyNot};
use std::sync::Arc;

mod support;

async fn engine() -> (tempfile::TempDir, Engine, TenantId) {
    let dir = tempfile::tempdir().unwrap();
    let store = rag_store::EmbeddedStore::open(dir.path(), rag_store::OpenMode::ReadWrite).unwrap();
    let engine = Engine::new(
        Components::lexical(Arc::new(store)),
        EngineConfig::default(),
    );
    let tenant = TenantId::default_tenant();
    engine
        .create_kb(&tenant, "kb", KbSettings::default())
        .await
        .unwrap();
    let mut faqs: Vec<String> = (0..6)
        .map(|i| {
            format!(r#"{{"question": "退款问题{i}", "answer": "退款退款退款，第{i}条说明。"}}"#)
        })
        .collect();
    faqs.push(r#"{"question": "配送费多少", "answer": "满三十元免配送费，偶尔退款。", "tags": ["delivery"]}"#.into());
    faqs.push(
        r#"{"question": "停用的退款说明", "answer": "退款说明已停用。", "status": "disabled"}"#
            .into(),
    );
    engine
        .ingest(&tenant, "kb", "faq.jsonl", faqs.join("\n").into_bytes())
        .await
        .unwrap();
    support::ingest_owned(
        &engine,
        &tenant,
        "secret.md",
        "# 机密\n\n退款的内部规定。",
        "alice",
    )
    .await;
    (dir, engine, tenant)
}

async fn id_of(engine: &Engine, tenant: &TenantId, needle: &str) -> String {
    let kb = engine.kb(tenant, "kb").await.unwrap();
    let index = engine.index(tenant, &kb).await.unwrap();
    let id = index
        .lexical
        .passage_metas()
        .map(|p| index.lexical.passage(p.id).unwrap())
        .find(|p| p.title.contains(needle) || p.body.contains(needle))
        .unwrap_or_else(|| panic!("no passage with {needle}"))
        .id;
    id.to_string()
}

fn request(query: &str, filters: Filters) -> QueryRequest {
    QueryRequest {
        kb: "kb".into(),
        query: query.into(),
        params: None,
        overrides: RetrievalOverrides {
            paths: Some(vec![PathKind::Bm25, PathKind::Substring]),
            per_path_k: Some(2),
            ..Default::default()
        },
        filters,
        generate: false,
        conversation_id: None,
    }
}

fn path(w: &WhyNot, path: PathKind) -> &rag_engine::PathVerdict {
    w.paths
        .iter()
        .find(|v| v.path == path)
        .unwrap_or_else(|| panic!("no verdict for {path:?}: {w:?}"))
}

#[tokio::test]
async fn an_entry_cut_by_per_path_k_reports_its_true_rank() {
    let (_dir, engine, tenant) = engine().await;
    let id = id_of(&engine, &tenant, "配送费").await;
    let w = engine
        .why_not(
            &tenant,
            request("退款", Filters::default()),
            Viewer::Public,
            &id,
        )
        .await
        .unwrap();
    let v = path(&w, PathKind::Bm25);
    assert_eq!(v.status, "cut_by_k", "{v:?}");
    assert_eq!(v.k, 2);
    // Six entries say 退款 more often; it is seventh among the visible ones.
    let rank = v.rank.expect("a rank");
    assert!(rank > 2, "rank {rank} should be beyond k");
    assert_eq!(rank, 7, "{v:?}");
    assert!(v.score.unwrap() > 0.0);
    assert!(w.fused_rank.is_none());
}

#[tokio::test]
async fn a_returned_entry_has_its_rank_and_fusion() {
    let (_dir, engine, tenant) = engine().await;
    let id = id_of(&engine, &tenant, "配送费").await;
    let w = engine
        .why_not(
            &tenant,
            request("配送费", Filters::default()),
            Viewer::Public,
            &id,
        )
        .await
        .unwrap();
    assert_eq!(path(&w, PathKind::Bm25).status, "returned");
    assert_eq!(path(&w, PathKind::Bm25).rank, Some(1));
    assert_eq!(w.fused_rank, Some(1));
    assert!(!w.contributions.is_empty());
    assert_eq!(w.reranked_rank, Some(1), "{w:?}");
    assert_eq!(w.context_source, Some(1), "{w:?}");
    assert_eq!(w.context_dropped, None, "{w:?}");
}

#[tokio::test]
async fn a_filtered_out_entry_names_the_filter() {
    let (_dir, engine, tenant) = engine().await;
    let id = id_of(&engine, &tenant, "配送费").await;
    let filters = Filters {
        tags: vec!["billing".into()],
        ..Default::default()
    };
    let w = engine
        .why_not(&tenant, request("配送费", filters), Viewer::Public, &id)
        .await
        .unwrap();
    let v = path(&w, PathKind::Bm25);
    assert_eq!(v.status, "filtered", "{v:?}");
    assert_eq!(v.filter.as_deref(), Some("tags"));
}

#[tokio::test]
async fn missing_query_terms_are_named() {
    let (_dir, engine, tenant) = engine().await;
    let id = id_of(&engine, &tenant, "配送费").await;
    let w = engine
        .why_not(
            &tenant,
            request("营业时间", Filters::default()),
            Viewer::Public,
            &id,
        )
        .await
        .unwrap();
    let v = path(&w, PathKind::Bm25);
    assert_eq!(v.status, "no_match", "{v:?}");
    assert!(
        v.missing_terms.iter().any(|t| t == "营业"),
        "missing terms {:?}",
        v.missing_terms
    );
    let s = path(&w, PathKind::Substring);
    assert_eq!(s.status, "no_match", "{s:?}");
    assert!(!s.missing_terms.is_empty(), "{s:?}");
}

#[tokio::test]
async fn an_invisible_entry_is_not_found_like_a_nonexistent_one() {
    let (_dir, engine, tenant) = engine().await;
    let secret = id_of(&engine, &tenant, "内部规定").await;
    // Its owner sees it.
    engine
        .why_not(
            &tenant,
            request("退款", Filters::default()),
            Viewer::Owner("alice".into()),
            &secret,
        )
        .await
        .unwrap();
    let invisible = engine
        .why_not(
            &tenant,
            request("退款", Filters::default()),
            Viewer::Public,
            &secret,
        )
        .await
        .unwrap_err();
    let fake = "faq:0190b5f4-0000-7000-8000-000000000000";
    let missing = engine
        .why_not(
            &tenant,
            request("退款", Filters::default()),
            Viewer::Public,
            fake,
        )
        .await
        .unwrap_err();
    for e in [&invisible, &missing] {
        assert!(
            matches!(e, CoreError::User(UserError::NotFound { .. })),
            "{e:?}"
        );
        assert_eq!(e.code(), "not_found");
    }
    assert_eq!(
        invisible.public_message().replace(&secret, "ID"),
        missing.public_message().replace(fake, "ID")
    );
}

#[tokio::test]
async fn a_disabled_faq_entry_is_filtered_by_status_on_every_path() {
    let (_dir, engine, tenant) = engine().await;
    let disabled = engine
        .faqs(&tenant, "kb")
        .await
        .unwrap()
        .into_iter()
        .find(|f| f.question.contains("停用"))
        .unwrap();
    let id = format!("faq:{}", disabled.id);
    let w = engine
        .why_not(
            &tenant,
            request("停用的退款说明", Filters::default()),
            Viewer::Public,
            &id,
        )
        .await
        .unwrap();
    assert_eq!(w.title, "停用的退款说明");
    assert_eq!(w.paths.len(), 2, "{w:?}");
    for v in &w.paths {
        assert_eq!(v.status, "filtered", "{v:?}");
        assert_eq!(v.filter.as_deref(), Some("status"), "{v:?}");
        assert!(v.reason.contains("disabled"), "{v:?}");
    }
    assert_eq!(w.fused_rank, None);
}
