//! FAQ drafting through the engine over a real store, with a scripted
//! generator: who may draft from which document, what a rejected reply
//! leaves behind, and what re-syncing a document does to its drafts.

use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::StreamExt;
use rag_core::{
    CoreError, DocId, DraftSettings, FaqStatus, GenEvent, GenerateRequest, Generator, KbSettings,
    TenantId, Viewer,
};
use rag_engine::{
    Components, DraftFailure, Engine, EngineConfig, FaqPatch, IngestOptions, IngestProgress,
};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Answers each request with the next scripted reply (`Err` = a provider failure).
#[derive(Default)]
struct Scripted {
    replies: Mutex<VecDeque<Result<String, String>>>,
    asked: Mutex<Vec<GenerateRequest>>,
}

impl Scripted {
    fn then(&self, reply: Result<&str, &str>) {
        self.replies
            .lock()
            .unwrap()
            .push_back(reply.map(str::to_owned).map_err(str::to_owned));
    }
}

#[async_trait]
impl Generator for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }
    async fn generate(
        &self,
        request: GenerateRequest,
    ) -> Result<BoxStream<'static, Result<GenEvent, CoreError>>, CoreError> {
        self.asked.lock().unwrap().push(request);
        match self
            .replies
            .lock()
            .unwrap()
            .pop_front()
            .expect("a reply was scripted")
        {
            Ok(text) => {
                Ok(futures::stream::iter([Ok(GenEvent::Delta(text)), Ok(GenEvent::Done)]).boxed())
            }
            Err(message) => Err(CoreError::Component {
                component: "generator".into(),
                message,
            }),
        }
    }
}

struct Kb {
    _dir: tempfile::TempDir,
    engine: Engine,
    llm: Arc<Scripted>,
    tenant: TenantId,
}

async fn kb(drafts: DraftSettings, with_llm: bool) -> Kb {
    let dir = tempfile::tempdir().unwrap();
    let store = rag_store::EmbeddedStore::open(dir.path(), rag_store::OpenMode::ReadWrite).unwrap();
    let llm = Arc::new(Scripted::default());
    let mut components = Components::lexical(Arc::new(store));
    if with_llm {
        components.generator = Some(llm.clone());
    }
    let engine = Engine::new(components, EngineConfig::default());
    let tenant = TenantId::default_tenant();
    engine
        .create_kb(
            &tenant,
            "kb",
            KbSettings {
                drafts,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    Kb {
        _dir: dir,
        engine,
        llm,
        tenant,
    }
}

impl Kb {
    async fn ingest(
        &self,
        source: &str,
        text: &str,
        owner: Option<&str>,
    ) -> (DocId, Vec<IngestProgress>) {
        let mut events = Vec::new();
        let options = IngestOptions {
            owner: owner.map(str::to_owned),
            ..IngestOptions::new(self.engine.config().chunk)
        };
        self.engine
            .ingest_with(
                &self.tenant,
                "kb",
                source,
                text.as_bytes().to_vec(),
                &options,
                &mut |e| events.push(e),
            )
            .await
            .unwrap();
        let docs = self
            .engine
            .documents(&self.tenant, "kb", &Viewer::Everything)
            .await
            .unwrap();
        let doc = docs
            .iter()
            .find(|d| d.source == source && d.owner.as_deref() == owner)
            .expect("stored");
        (doc.id, events)
    }
    async fn draft(&self, doc: DocId) -> Result<rag_engine::DraftOutcome, DraftFailure> {
        self.engine
            .draft_faqs(&self.tenant, "kb", doc, &Viewer::Public)
            .await
    }
    async fn faqs(&self) -> Vec<rag_core::FaqEntry> {
        self.engine.faqs(&self.tenant, "kb").await.unwrap()
    }
}

const TWO: &str = r#"{"faqs": [{"question": "How much can the desk lift?", "answer": "120 kg."}, {"question": "How long is the motor warranty?", "answer": "Five years."}]}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drafting_needs_a_visible_unrestricted_document_and_an_llm() {
    let k = kb(DraftSettings::default(), false).await;
    let (doc, _) = k
        .ingest("desk.md", "# Desk\n\nThe desk lifts 120 kg.", None)
        .await;
    let (alices, _) = k
        .ingest(
            "private.md",
            "# Notes\n\nAlice's private notes.",
            Some("alice"),
        )
        .await;
    // Unknown and invisible documents are not found, before anything else.
    assert!(
        matches!(k.draft(DocId::generate()).await, Err(DraftFailure::Core(e)) if e.to_string().contains("not found"))
    );
    let bob = k
        .engine
        .draft_faqs(&k.tenant, "kb", alices, &Viewer::Owner("bob".into()))
        .await;
    assert!(matches!(bob, Err(DraftFailure::Core(e)) if e.to_string().contains("not found")));
    // Her own document is refused for her too: FAQ entries carry no owner.
    let alice = k
        .engine
        .draft_faqs(&k.tenant, "kb", alices, &Viewer::Owner("alice".into()))
        .await;
    assert!(
        matches!(alice, Err(DraftFailure::Restricted { .. })),
        "{alice:?}"
    );
    let none = k.draft(doc).await.unwrap_err();
    assert_eq!(none.code(), "no_llm");
    assert!(none.to_string().contains("needs an LLM"), "{none}");
    assert!(k.faqs().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_reply_or_a_failing_llm_keeps_the_earlier_drafts() {
    let k = kb(
        DraftSettings {
            status: FaqStatus::Approved,
            ..DraftSettings::default()
        },
        true,
    )
    .await;
    let (doc, _) = k
        .ingest(
            "desk.md",
            "# Desk\n\nThe desk lifts 120 kg. The motor warranty is five years.",
            None,
        )
        .await;
    k.llm.then(Ok(TWO));
    let first = k.draft(doc).await.unwrap();
    assert_eq!(first.added.len(), 2);
    assert!(first
        .added
        .iter()
        .all(|f| f.status == FaqStatus::Approved && f.source_doc == Some(doc) && !f.edited));
    assert_eq!(first.language, rag_answer::AnswerLanguage::En);
    let request = k.llm.asked.lock().unwrap()[0].clone();
    assert!(request.json, "JSON mode is asked for");
    assert!(request.messages[1]
        .content
        .contains("The desk lifts 120 kg."));

    for (reply, code) in [
        (Ok("Sorry, I can't."), "drafts_rejected"),
        (
            Ok(r#"{"faqs": [{"question": "Only a question?"}]}"#),
            "drafts_rejected",
        ),
        (Err("HTTP 503 from the provider"), "llm_failed"),
    ] {
        k.llm.then(reply);
        let err = k.draft(doc).await.unwrap_err();
        assert_eq!(err.code(), code, "{err}");
    }
    assert_eq!(k.faqs().await, first.added, "nothing changed");

    // Drafting again replaces the earlier unedited drafts (a repaired reply is fine).
    k.llm.then(Ok(r#"[{"question": "how long is the motor warranty", "answer": "5 years"}, {"question": "Does it have a memory?", "answer": "Yes, four presets.",}]"#));
    let k2 = k.draft(doc).await.unwrap();
    assert_eq!(k2.replaced, 2, "the earlier unedited drafts are replaced");
    assert_eq!(
        k2.repairs,
        [
            "removed 1 trailing comma",
            "read a bare array as {\"faqs\": [...]}"
        ]
    );
    let questions: Vec<String> = k.faqs().await.into_iter().map(|f| f.question).collect();
    assert_eq!(
        questions,
        ["how long is the motor warranty", "Does it have a memory?"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_replaces_unedited_drafts_keeps_edited_ones_and_drafts_again_when_automatic() {
    let k = kb(
        DraftSettings {
            auto: true,
            ..DraftSettings::default()
        },
        true,
    )
    .await;
    k.llm.then(Ok(TWO));
    let (v1, events) = k
        .ingest(
            "desk.md",
            "# Desk\n\nThe desk lifts 120 kg. The motor warranty is five years.",
            None,
        )
        .await;
    let stages: Vec<&str> = events.iter().map(IngestProgress::stage).collect();
    assert_eq!(
        stages,
        [
            "received",
            "extracted",
            "chunked",
            "embedded",
            "drafted",
            "indexed"
        ]
    );
    assert!(
        matches!(
            &events[4],
            IngestProgress::Drafted {
                added: 2,
                replaced: 0,
                error: None,
                ..
            }
        ),
        "{:?}",
        events[4]
    );
    let drafts = k.faqs().await;
    assert!(
        drafts
            .iter()
            .all(|f| f.status == FaqStatus::Pending && f.source_doc == Some(v1)),
        "{drafts:?}"
    );

    // A person edits the second draft (editing sets `edited`).
    let edited = k
        .engine
        .update_faq(
            &k.tenant,
            "kb",
            drafts[1].id,
            FaqPatch {
                answer: Some("Five years, checked.".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(edited.edited);
    // Approving is not editing.
    k.engine
        .set_faq_status(&k.tenant, "kb", drafts[0].id, FaqStatus::Approved)
        .await
        .unwrap();

    // Re-sync with new content; this time the LLM fails: the ingest still succeeds.
    k.llm.then(Err("HTTP 500"));
    let (v2, events) = k
        .ingest(
            "desk.md",
            "# Desk\n\nThe desk lifts 150 kg. The motor warranty is five years.",
            None,
        )
        .await;
    assert_ne!(v1, v2);
    let IngestProgress::Drafted {
        added: 0,
        replaced: 1,
        error: Some(e),
        ..
    } = &events[4]
    else {
        panic!("{events:?}")
    };
    assert_eq!(e.code, "llm_failed");
    assert!(
        matches!(
            events.last(),
            Some(IngestProgress::Indexed { replaced: true, .. })
        ),
        "{events:?}"
    );
    let after = k.faqs().await;
    assert_eq!(
        after.len(),
        1,
        "the unedited (approved) draft went with the old version: {after:?}"
    );
    assert_eq!(
        (after[0].id, after[0].source_doc, after[0].answer.as_str()),
        (edited.id, Some(v2), "Five years, checked.")
    );

    // Re-sync once more, the LLM answering: new drafts next to the kept edit.
    k.llm.then(Ok(
        r#"{"faqs": [{"question": "How much can the desk lift?", "answer": "200 kg."}]}"#,
    ));
    let (v3, events) = k
        .ingest(
            "desk.md",
            "# Desk\n\nThe desk lifts 200 kg. The motor warranty is five years.",
            None,
        )
        .await;
    assert!(
        matches!(
            &events[4],
            IngestProgress::Drafted {
                added: 1,
                replaced: 0,
                error: None,
                ..
            }
        ),
        "{:?}",
        events[4]
    );
    let after = k.faqs().await;
    let links: Vec<(&str, Option<DocId>, bool)> = after
        .iter()
        .map(|f| (f.answer.as_str(), f.source_doc, f.edited))
        .collect();
    assert_eq!(
        links,
        [
            ("Five years, checked.", Some(v3), true),
            ("200 kg.", Some(v3), false)
        ]
    );

    // An owner's document is stored but not drafted from; the reason is reported.
    let (_, events) = k
        .ingest("mine.md", "# Mine\n\nPrivate.", Some("alice"))
        .await;
    let IngestProgress::Drafted { error: Some(e), .. } = &events[4] else {
        panic!("{events:?}")
    };
    assert_eq!(e.code, "restricted_document");
    assert_eq!(
        k.llm.asked.lock().unwrap().len(),
        3,
        "the LLM was not asked for her document"
    );
}
