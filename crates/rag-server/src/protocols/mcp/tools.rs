//! The four MCP tools: `list_knowledge_bases`, `search`, `ask` and
//! `faq_lookup`. Each returns one text content item: UTF-8 JSON for the
//! first three, the FAQ tool's own text for `faq_lookup`. A failure of the
//! tool itself (an unknown knowledge base, a bad argument, a limit) is a
//! result with `isError: true` and `{"error": {code, message}}` as its
//! text, so the model can read it and correct itself; an unknown tool is a
//! JSON-RPC error.

use super::jsonrpc::{RpcError, INVALID_PARAMS};
use crate::error::ApiError;
use crate::protocols::access::Access;
use crate::protocols::service;
use crate::state::AppState;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

/// The tool list with their input schemas.
pub(crate) fn list(max_top_k: usize) -> Value {
    let kb = json!({
        "type": "string",
        "description": "Knowledge base name, from list_knowledge_bases. 知识库名称。"
    });
    json!({ "tools": [
        {
            "name": "list_knowledge_bases",
            "title": "List knowledge bases",
            "description": "List the knowledge bases you can search and ask. 列出可检索、可提问的知识库。\
                Returns JSON: [{\"name\", \"created_at\"}].",
            "inputSchema": { "type": "object", "properties": {}, "additionalProperties": false },
            "annotations": { "readOnlyHint": true, "openWorldHint": false },
        },
        {
            "name": "search",
            "title": "Search a knowledge base",
            "description": "Hybrid search of one knowledge base (keyword, substring, typo, synonym, fact and vector recall, fused): \
                the best passages with title, text, score (0-1) and source, as JSON. Use it to read the evidence yourself. \
                在知识库中混合检索（关键词、子串、错别字、同义词、事实与向量召回融合），返回最相关段落的标题、正文、分数（0-1）和来源（JSON）。",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "kb": kb,
                    "query": { "type": "string", "description": "What to look for, in Chinese or English. 检索内容，中文或英文。" },
                    "top_k": { "type": "integer", "minimum": 1, "maximum": max_top_k, "description": "How many hits (default: the knowledge base's setting). 返回条数。" }
                },
                "required": ["kb", "query"],
                "additionalProperties": false
            },
            "annotations": { "readOnlyHint": true, "openWorldHint": false },
        },
        {
            "name": "ask",
            "title": "Ask a knowledge base",
            "description": "Ask one knowledge base a question: a cited answer ([n] marks name its sources), the sources, \
                and kb_miss=true when the knowledge base does not cover the question (then do not make an answer up). \
                Pass the same conversation_id to ask follow-ups. \
                向知识库提问：返回带 [n] 引用的答案和来源；知识库未覆盖时 kb_miss 为 true（此时不要编造答案）。追问时传入相同的 conversation_id。",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "kb": kb,
                    "question": { "type": "string", "description": "The question. 问题。" },
                    "conversation_id": { "type": "string", "minLength": 1, "maxLength": 128, "description": "Continue this conversation (any id you choose). 会话标识，用于追问。" }
                },
                "required": ["kb", "question"],
                "additionalProperties": false
            },
            "annotations": { "readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false },
        },
        {
            "name": "faq_lookup",
            "title": "Look up FAQ entries",
            "description": "Look up the knowledge base's approved FAQ entries: \"Q: … A: … Source: …\" per hit, \
                or \"No relevant FAQs found for: <query>\". 查询知识库中已审核的常见问题：每条命中为 \"Q: … A: … Source: …\"，\
                无命中时返回 \"No relevant FAQs found for: <query>\"。",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "kb": kb,
                    "query": { "type": "string", "description": "The customer's question. 顾客的问题。" }
                },
                "required": ["kb", "query"],
                "additionalProperties": false
            },
            "annotations": { "readOnlyHint": true, "openWorldHint": false },
        }
    ]})
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    kb: String,
    query: String,
    #[serde(default)]
    top_k: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AskArgs {
    kb: String,
    question: String,
    #[serde(default)]
    conversation_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FaqArgs {
    kb: String,
    query: String,
}

/// Runs tool `name`.
pub(crate) async fn call(
    state: &AppState,
    access: &Access,
    name: &str,
    arguments: Value,
) -> Result<Value, RpcError> {
    let outcome = match name {
        "list_knowledge_bases" => match args::<NoArgs>(arguments) {
            Ok(NoArgs {}) => json_text(service::list_kbs(state, access).await),
            Err(e) => Err(e),
        },
        "search" => match args::<SearchArgs>(arguments) {
            Ok(a) => json_text(service::search(state, access, &a.kb, a.query, a.top_k, None).await),
            Err(e) => Err(e),
        },
        "ask" => match args::<AskArgs>(arguments) {
            Ok(a) => {
                json_text(service::ask(state, access, &a.kb, a.question, a.conversation_id).await)
            }
            Err(e) => Err(e),
        },
        "faq_lookup" => match args::<FaqArgs>(arguments) {
            Ok(a) => service::faq_lookup(state, access, &a.kb, &a.query).await,
            Err(e) => Err(e),
        },
        other => {
            return Err(RpcError::new(
                INVALID_PARAMS,
                format!("unknown tool {other:?}; see tools/list"),
            ))
        }
    };
    Ok(match outcome {
        Ok(text) => json!({ "content": [{ "type": "text", "text": text }], "isError": false }),
        Err(e) => {
            let text = json!({ "error": { "code": e.code, "message": e.message } }).to_string();
            json!({ "content": [{ "type": "text", "text": text }], "isError": true })
        }
    })
}

/// The arguments as `T`; a mismatch is the tool's error (`invalid_param`).
fn args<T: DeserializeOwned>(arguments: Value) -> Result<T, ApiError> {
    let arguments = if arguments.is_null() {
        json!({})
    } else {
        arguments
    };
    serde_json::from_value(arguments)
        .map_err(|e| ApiError::bad_request("invalid_param", format!("bad arguments: {e}")))
}

fn json_text<T: serde::Serialize>(r: Result<T, ApiError>) -> Result<String, ApiError> {
    r.and_then(|v| serde_json::to_string(&v).map_err(ApiError::internal))
}
