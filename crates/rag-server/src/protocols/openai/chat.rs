//! `POST /v1/chat/completions`: `model` names the knowledge base, the last
//! user message is the question, and the answer comes back as OpenAI's
//! `chat.completion` (or, with `stream: true`, as `chat.completion.chunk`
//! events, see [`super::stream`]), its content carrying the `[n]`
//! citations. The extension field `ragscope` holds the sources, `kb_miss`
//! and the query-log id.
//!
//! Multi-turn `messages` go through the engine's follow-up rewriting, whose
//! memory is the query log: every request of a chat is asked under one
//! conversation id derived from the key, the optional `user` field, the
//! system messages and the chat's first user message, so the earlier turns
//! asked through this API are found in the log. Fields of OpenAI's request
//! that do not apply (temperature, max_tokens, tools, …) are accepted and
//! ignored; `n` must be 1.

use super::error::OpenAiError;
use crate::protocols::access::Access;
use crate::protocols::service::{self, Answer};
use crate::state::AppState;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The request (unknown fields are ignored, as OpenAI clients send many).
#[derive(Debug, Deserialize)]
pub(super) struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub n: Option<u32>,
    #[serde(default)]
    pub user: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

#[derive(Debug, Deserialize)]
pub(super) struct Message {
    pub role: String,
    #[serde(default)]
    pub content: Option<Content>,
}

/// A message's content: a string, or parts of which the text ones count.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Debug, Deserialize)]
pub(super) struct Part {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}

impl Message {
    fn text(&self) -> String {
        match &self.content {
            None => String::new(),
            Some(Content::Text(t)) => t.clone(),
            Some(Content::Parts(parts)) => parts
                .iter()
                .filter(|p| p.kind == "text")
                .filter_map(|p| p.text.as_deref())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// What to ask: the knowledge base, the question and the conversation.
pub(super) struct Turn {
    pub kb: String,
    pub question: String,
    pub conversation_id: String,
    pub include_usage: bool,
}

impl ChatRequest {
    /// Checks the request and picks out the turn to ask.
    pub(super) fn turn(&self, access: &Access) -> Result<Turn, OpenAiError> {
        if self.n.is_some_and(|n| n != 1) {
            return Err(OpenAiError::invalid("n", "only n = 1 is supported"));
        }
        let last = self
            .messages
            .last()
            .ok_or_else(|| OpenAiError::invalid("messages", "messages is empty"))?;
        if last.role != "user" {
            return Err(OpenAiError::invalid(
                "messages",
                "the last message must be the user's question",
            ));
        }
        let question = last.text();
        if question.trim().is_empty() {
            return Err(OpenAiError::invalid(
                "messages",
                "the last user message has no text",
            ));
        }
        Ok(Turn {
            kb: self.model.clone(),
            question,
            conversation_id: self.conversation_id(access),
            include_usage: self
                .stream_options
                .as_ref()
                .is_some_and(|o| o.include_usage),
        })
    }

    /// `openai:` and 32 hex digits of the sha256 of the key, the `user`
    /// field, the system messages and the first user message: the same for
    /// every request of one chat.
    fn conversation_id(&self, access: &Access) -> String {
        let mut h = Sha256::new();
        let mut put = |s: &str| {
            h.update((s.len() as u64).to_le_bytes());
            h.update(s.as_bytes());
        };
        put(&access.caller.tenant.0);
        put(&access.caller.key_id);
        put(self.user.as_deref().unwrap_or(""));
        for m in self
            .messages
            .iter()
            .filter(|m| m.role == "system" || m.role == "developer")
        {
            put(&m.text());
        }
        put(&self
            .messages
            .iter()
            .find(|m| m.role == "user")
            .map(Message::text)
            .unwrap_or_default());
        let digest = h.finalize();
        let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        format!("openai:{hex}")
    }
}

/// The `ragscope` extension field.
pub(super) fn extension(answer: &Answer) -> Value {
    json!({
        "sources": answer.sources,
        "kb_miss": answer.kb_miss,
        "log_id": answer.log_id,
        "conversation_id": answer.conversation_id,
        "rewrite_method": answer.rewrite_method,
        "warnings": answer.warnings,
    })
}

/// OpenAI's usage object (zeros when no LLM answered).
pub(super) fn usage(answer: &Answer) -> Value {
    let u = answer.usage.unwrap_or_default();
    json!({
        "prompt_tokens": u.prompt,
        "completion_tokens": u.completion,
        "total_tokens": u.prompt + u.completion,
    })
}

/// The completion's id: from the query-log id when there is one.
pub(super) fn completion_id(log_id: Option<&str>) -> String {
    match log_id {
        Some(id) => format!("chatcmpl-{id}"),
        None => format!("chatcmpl-{}", uuid::Uuid::new_v4().simple()),
    }
}

/// A whole `chat.completion`.
pub(super) async fn complete(
    state: &AppState,
    access: &Access,
    turn: Turn,
) -> Result<Value, OpenAiError> {
    let answer = service::ask(
        state,
        access,
        &turn.kb,
        turn.question,
        Some(turn.conversation_id),
    )
    .await?;
    Ok(json!({
        "id": completion_id(answer.log_id.as_deref()),
        "object": "chat.completion",
        "created": rag_core::now(),
        "model": turn.kb,
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": answer.answer, "refusal": null },
            "logprobs": null,
            "finish_reason": "stop",
        }],
        "usage": usage(&answer),
        "ragscope": extension(&answer),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(v: Value) -> ChatRequest {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_turn_is_the_last_user_message_and_a_chat_keeps_its_conversation() {
        let access = Access::operator(rag_core::TenantId::default_tenant());
        let first = request(json!({
            "model": "shop", "temperature": 0.2,
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "怎么申请退款？"}]
        }));
        let later = request(json!({
            "model": "shop",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "怎么申请退款？"}]},
                {"role": "assistant", "content": "在订单页申请 [1]"},
                {"role": "user", "content": [{"type": "text", "text": "要多久"}, {"type": "image_url"}]}
            ]
        }));
        let (a, b) = (first.turn(&access).unwrap(), later.turn(&access).unwrap());
        assert_eq!(b.question, "要多久");
        assert_eq!(a.conversation_id, b.conversation_id);
        assert!(a.conversation_id.starts_with("openai:") && a.conversation_id.len() == 39);
        let other = request(json!({
            "model": "shop", "user": "someone-else",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "怎么申请退款？"}]
        }));
        assert_ne!(
            other.turn(&access).unwrap().conversation_id,
            a.conversation_id
        );
        for bad in [
            json!({"model": "shop", "messages": []}),
            json!({"model": "shop", "messages": [{"role": "assistant", "content": "hi"}]}),
            json!({"model": "shop", "messages": [{"role": "user", "content": "  "}]}),
            json!({"model": "shop", "n": 2, "messages": [{"role": "user", "content": "hi"}]}),
        ] {
            assert!(request(bad).turn(&access).is_err());
        }
    }
}
