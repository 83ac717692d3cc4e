//! Event delivery under a reader that stalls: every event arrives, in order,
//! `done` last. The run waits for the reader instead of dropping events
//! (it used to `try_send` into 64 slots and ignore `Full`).

use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::StreamExt;
use rag_core::{
    CoreError, GenEvent, GenerateRequest, Generator, KbSettings, PipelineEvent, QueryRequest,
    TenantId,
};
use rag_engine::{Components, Engine, EngineConfig};
use std::sync::Arc;
use tokio::sync::Notify;

const TOKENS: usize = 400;

/// Streams many small tokens, all ready at once, and says when the last one
/// has been taken from it.
struct Chatty {
    started: Arc<Notify>,
    produced: Arc<Notify>,
}

#[async_trait]
impl Generator for Chatty {
    fn name(&self) -> &str {
        "chatty"
    }
    async fn generate(
        &self,
        _request: GenerateRequest,
    ) -> Result<BoxStream<'static, Result<GenEvent, CoreError>>, CoreError> {
        self.started.notify_one();
        let produced = self.produced.clone();
        let tokens = (0..TOKENS).map(|i| {
            Ok(GenEvent::Delta(if i == 0 {
                "退款 [1]".to_owned()
            } else {
                " 。".to_owned()
            }))
        });
        let tail = futures::stream::once(async move {
            produced.notify_one();
            Ok(GenEvent::Done)
        });
        Ok(futures::stream::iter(tokens).chain(tail).boxed())
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_stalled_reader_gets_every_event_and_done() {
    let dir = tempfile::tempdir().unwrap();
    let store = rag_store::EmbeddedStore::open(dir.path(), rag_store::OpenMode::ReadWrite).unwrap();
    let (started, produced) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let mut components = Components::lexical(Arc::new(store));
    components.generator = Some(Arc::new(Chatty {
        started: started.clone(),
        produced: produced.clone(),
    }));
    let engine = Engine::new(components, EngineConfig::default());
    let tenant = TenantId::default_tenant();
    engine
        .create_kb(&tenant, "kb", KbSettings::default())
        .await
        .unwrap();
    let faq = r#"{"question": "怎么退款", "answer": "在订单页申请退款，七天内到账。"}"#;
    engine
        .ingest(&tenant, "kb", "faq.jsonl", faq.as_bytes().to_vec())
        .await
        .unwrap();
    let mut stream = Box::pin(engine.query(
        &tenant,
        QueryRequest {
            kb: "kb".into(),
            query: "怎么退款".into(),
            params: None,
            overrides: Default::default(),
            filters: Default::default(),
            generate: true,
            conversation_id: None,
        },
    ));
    // The reader stalls: it reads nothing until the generator has started
    // and then either everything was produced (the run never waited for
    // it) or the runtime went idle (the run is waiting for room). With the
    // clock paused, the hour passes only when nothing else can run.
    started.notified().await;
    tokio::select! {
        _ = produced.notified() => {}
        _ = tokio::time::sleep(std::time::Duration::from_secs(3600)) => {}
    }
    let mut events = Vec::new();
    while let Some(e) = stream.next().await {
        events.push(e);
    }
    let tokens = events
        .iter()
        .filter(|e| matches!(e, PipelineEvent::AnswerToken { .. }))
        .count();
    assert_eq!(tokens, TOKENS, "answer tokens lost");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, PipelineEvent::Answered { .. })),
        "answered lost"
    );
    assert_eq!(events.last().map(|e| e.kind()), Some("done"));
}
