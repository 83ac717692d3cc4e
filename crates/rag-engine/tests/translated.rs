//! The translated path: a Chinese question finds English passages (and the
//! reverse) through the bilingual dictionary's translations of its words,
//! with a note of what it translated; the path's list is BM25 over those
//! translations only. Without a dictionary, or with nothing to translate,
//! it returns nothing and says why. Why-not explains a passage it missed.

use rag_core::{KbSettings, PathKind, QueryRequest, RetrievalParams, TenantId, Viewer};
use rag_engine::{Components, Dictionary, Engine, EngineConfig, PipelineOutput, QueryOptions};
use std::sync::Arc;

const DICTIONARY: &str = "\
# a few CC-CEDICT lines
退款 退款 [tui4 kuan3] /to refund/refund/
信用卡 信用卡 [xin4 yong4 ka3] /credit card/
挂失 挂失 [gua4 shi1] /to report the loss of sth/
銀行 银行 [yin2 hang2] /bank/CL:家[jia1]/
營業時間 营业时间 [ying2 ye4 shi2 jian1] /business hours/opening hours/
";

const DOCS: [(&str, &str); 4] = [
    (
        "refunds.txt",
        "Refunds reach your account in five days. Call us if a refund is late.",
    ),
    (
        "cards.txt",
        "A lost credit card is blocked at once. A new card arrives within a week.",
    ),
    ("hours.txt", "银行的营业时间是每天九点到五点。"),
    // Chinese text with an English word: BM25's to find, not the
    // translated path's.
    (
        "policy.txt",
        "我们的 refund 政策：如需办理请联系客服，我们会在五个工作日内处理。",
    ),
];

async fn setup(dictionary: Option<Arc<Dictionary>>) -> (tempfile::TempDir, Engine, TenantId) {
    let dir = tempfile::tempdir().unwrap();
    let store = rag_store::EmbeddedStore::open(dir.path(), rag_store::OpenMode::ReadWrite).unwrap();
    let mut components = Components::lexical(Arc::new(store));
    components.dictionary = dictionary;
    let engine = Engine::new(components, EngineConfig::default());
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
    (dir, engine, tenant)
}

/// A query of the knowledge base "kb" with the default parameters.
fn request(q: &str) -> QueryRequest {
    QueryRequest {
        kb: "kb".into(),
        query: q.into(),
        params: Some(RetrievalParams::default()),
        overrides: Default::default(),
        filters: Default::default(),
        generate: false,
        conversation_id: None,
    }
}

async fn ask(engine: &Engine, tenant: &TenantId, q: &str) -> PipelineOutput {
    let request = request(q);
    let options = QueryOptions {
        views: true,
        log: false,
        viewer: Viewer::Everything,
    };
    engine
        .run(tenant, request, options, &mut |_| {})
        .await
        .unwrap()
}

fn translated(out: &PipelineOutput) -> &rag_core::RankedList {
    out.lists
        .iter()
        .find(|l| l.path == PathKind::Translated)
        .expect("a translated list")
}

/// The passage BM25 ranks first for a question in the passage's language.
async fn bm25_top(engine: &Engine, tenant: &TenantId, q: &str) -> rag_core::PassageId {
    let out = ask(engine, tenant, q).await;
    out.lists
        .iter()
        .find(|l| l.path == PathKind::Bm25)
        .unwrap()
        .hits[0]
        .id
}

#[tokio::test]
async fn a_chinese_question_finds_english_passages_through_the_dictionary() {
    let (_dir, engine, tenant) = setup(Some(Dictionary::from_text(DICTIONARY))).await;
    let out = ask(&engine, &tenant, "怎么退款？").await;
    let list = translated(&out);
    // The English passage only: the Chinese one holding "refund" is left out.
    assert_eq!(list.hits.len(), 1, "{list:?}");
    assert_eq!(
        list.hits[0].id,
        bm25_top(&engine, &tenant, "refunds late").await
    );
    assert_eq!(list.hits[0].matched, vec!["refund"]);
    assert_eq!(list.notes, vec!["退款 → refund"]);
    // BM25 finds nothing in English for a Chinese question.
    let bm25 = out.lists.iter().find(|l| l.path == PathKind::Bm25).unwrap();
    assert!(bm25.hits.is_empty());
    // Two words, each translated.
    let out = ask(&engine, &tenant, "信用卡挂失").await;
    assert_eq!(
        translated(&out).hits[0].id,
        bm25_top(&engine, &tenant, "lost card").await
    );
}

#[tokio::test]
async fn an_english_question_finds_chinese_passages() {
    let (_dir, engine, tenant) = setup(Some(Dictionary::from_text(DICTIONARY))).await;
    let out = ask(&engine, &tenant, "bank business hours").await;
    let list = translated(&out);
    assert_eq!(list.hits.len(), 1, "{list:?}");
    assert_eq!(
        list.hits[0].id,
        bm25_top(&engine, &tenant, "营业时间").await
    );
    assert_eq!(list.notes, vec!["bank → 银行"]);
}

#[tokio::test]
async fn without_a_dictionary_or_a_translation_the_path_says_why() {
    let (_dir, engine, tenant) = setup(None).await;
    let out = ask(&engine, &tenant, "怎么退款？").await;
    let list = translated(&out);
    assert!(list.hits.is_empty());
    assert!(
        list.notes[0].contains("no bilingual dictionary"),
        "{:?}",
        list.notes
    );

    let (_dir, engine, tenant) = setup(Some(Dictionary::from_text("no entries here"))).await;
    let list = translated(&ask(&engine, &tenant, "怎么退款？").await).clone();
    assert!(list.hits.is_empty());
    assert!(
        list.notes[0].contains("could not be read"),
        "{:?}",
        list.notes
    );

    let (_dir, engine, tenant) = setup(Some(Dictionary::from_text(DICTIONARY))).await;
    let list = translated(&ask(&engine, &tenant, "你好").await).clone();
    assert!(list.hits.is_empty());
    assert!(
        list.notes[0].contains("no word of the question"),
        "{:?}",
        list.notes
    );
}

/// Why-not's verdict of the translated path on the passage `id`, for `q`.
async fn translated_verdict(
    engine: &Engine,
    tenant: &TenantId,
    q: &str,
    id: rag_core::PassageId,
) -> rag_engine::PathVerdict {
    let request = request(q);
    let why = engine
        .why_not(tenant, request, Viewer::Everything, &id.to_string())
        .await
        .unwrap();
    why.paths
        .into_iter()
        .find(|v| v.path == PathKind::Translated)
        .unwrap()
}

#[tokio::test]
async fn why_not_names_the_translations_a_passage_lacks() {
    let (_dir, engine, tenant) = setup(Some(Dictionary::from_text(DICTIONARY))).await;
    let out = ask(&engine, &tenant, "信用卡挂失").await;
    assert!(!translated(&out).hits.is_empty());
    // The refunds passage, as BM25 finds it for an English question.
    let id = bm25_top(&engine, &tenant, "refund").await;
    let v = translated_verdict(&engine, &tenant, "信用卡挂失", id).await;
    assert_eq!(v.status, "no_match", "{v:?}");
    assert!(v.missing_terms.contains(&"credit".to_string()), "{v:?}");

    // A Chinese passage, for a Chinese question: not the path's to find.
    let hours = bm25_top(&engine, &tenant, "营业时间").await;
    let v = translated_verdict(&engine, &tenant, "信用卡挂失", hours).await;
    assert_eq!(v.status, "no_match", "{v:?}");
    assert!(v.reason.contains("written in Chinese"), "{v:?}");
}
