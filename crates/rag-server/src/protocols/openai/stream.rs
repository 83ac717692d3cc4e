//! The streamed `chat.completion.chunk`s: `data: <chunk JSON>` lines
//! without `event:` names. The first chunk names the role, each piece of
//! the answer as the engine produces it is one chunk, the last one has
//! `finish_reason: "stop"` and the `ragscope` extension (sources, `kb_miss`,
//! log id), then a usage chunk when `stream_options.include_usage` asked for
//! one, then `data: [DONE]`. A run that fails midway sends OpenAI's
//! `{"error": …}` object as its last message. Closing the connection
//! cancels the run.

use super::chat::{completion_id, extension, usage, Turn};
use super::error::OpenAiError;
use crate::error::ApiError;
use crate::protocols::access::Access;
use crate::protocols::service::{self, Answer};
use crate::state::AppState;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use rag_core::PipelineEvent;
use serde_json::{json, Value};
use std::convert::Infallible;

/// What a chunk needs to repeat.
struct Chunks {
    id: String,
    created: i64,
    model: String,
}

impl Chunks {
    fn chunk(&self, delta: Value, finish: Option<&str>) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish }],
        })
    }
}

fn data(v: &Value) -> Event {
    Event::default().data(v.to_string())
}

/// Starts the run and streams its chunks.
pub(super) async fn stream(
    state: &AppState,
    access: &Access,
    turn: Turn,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, OpenAiError> {
    let conversation_id = Some(turn.conversation_id.clone());
    let events = service::ask_events(
        state,
        access,
        &turn.kb,
        turn.question.clone(),
        conversation_id.clone(),
    )
    .await?;
    let mut chunks = Chunks {
        id: completion_id(None),
        created: rag_core::now(),
        model: turn.kb.clone(),
    };
    // The events an answer is read from (not the per-path lists).
    let mut kept: Vec<PipelineEvent> = Vec::new();
    let include_usage = turn.include_usage;
    let out = events.flat_map(move |e| {
        let mut out: Vec<Event> = Vec::new();
        match e {
            PipelineEvent::QueryReceived { ref query_id, .. } => {
                chunks.id = completion_id(Some(query_id));
                out.push(data(
                    &chunks.chunk(json!({ "role": "assistant", "content": "" }), None),
                ));
                kept.push(e);
            }
            PipelineEvent::AnswerToken { text } => {
                out.push(data(&chunks.chunk(json!({ "content": text }), None)));
            }
            PipelineEvent::Error { code, message } => {
                let error = OpenAiError::from(ApiError::from_code(&code, message));
                out.push(data(&error.body()));
            }
            PipelineEvent::Done { .. } => {
                kept.push(e);
                match Answer::from_events(&turn.kb, &turn.question, conversation_id.clone(), &kept)
                {
                    Ok(answer) => {
                        let mut last = chunks.chunk(json!({}), Some("stop"));
                        last["ragscope"] = extension(&answer);
                        out.push(data(&last));
                        if include_usage {
                            let mut u = chunks.chunk(json!({}), None);
                            u["choices"] = json!([]);
                            u["usage"] = usage(&answer);
                            out.push(data(&u));
                        }
                        out.push(Event::default().data("[DONE]"));
                    }
                    Err(e) => out.push(data(&OpenAiError::from(e).body())),
                }
            }
            PipelineEvent::QueryAnalyzed { .. }
            | PipelineEvent::ContextAssembled { .. }
            | PipelineEvent::Answered { .. } => kept.push(e),
            _ => {}
        }
        futures::stream::iter(out.into_iter().map(Ok::<Event, Infallible>))
    });
    Ok(Sse::new(out).keep_alive(KeepAlive::default()))
}
