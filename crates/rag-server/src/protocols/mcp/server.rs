//! The MCP methods, whatever the transport: `initialize` with protocol
//! version negotiation, `ping`, `tools/list` and `tools/call`.
//!
//! This server speaks the handshake revisions of MCP (2024-11-05 to
//! 2025-11-25). A client that first probes for the stateless revision
//! (`server/discover`) gets "method not found" and falls back to
//! `initialize`, as the SDKs do.

use super::jsonrpc::{RpcError, INVALID_PARAMS, METHOD_NOT_FOUND};
use super::tools;
use crate::protocols::access::Access;
use crate::state::AppState;
use serde_json::{json, Value};

/// Revisions this server speaks, newest first.
pub(crate) const PROTOCOL_VERSIONS: &[&str] =
    &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The revision to answer an `initialize` that asked for `requested`: the
/// same when we speak it, else our newest (the client then decides whether
/// it can go on).
pub(crate) fn negotiate(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|r| PROTOCOL_VERSIONS.iter().copied().find(|v| *v == r))
        .unwrap_or(PROTOCOL_VERSIONS[0])
}

/// The result of `initialize` and the negotiated revision.
pub(crate) fn initialize(params: &Value) -> (Value, &'static str) {
    let version = negotiate(params.get("protocolVersion").and_then(Value::as_str));
    let result = json!({
        "protocolVersion": version,
        "capabilities": { "tools": { "listChanged": false } },
        "serverInfo": {
            "name": "ragscope",
            "title": "ragscope knowledge bases",
            "version": env!("CARGO_PKG_VERSION"),
        },
        "instructions": "Search and ask ragscope knowledge bases (Chinese and English). \
            Call list_knowledge_bases first; ask gives a cited answer and says when the \
            knowledge base does not cover a question (kb_miss). \
            检索和询问 ragscope 知识库（中英文）：先调用 list_knowledge_bases；ask 返回带引用的答案，知识库未覆盖时 kb_miss 为 true。",
    });
    (result, version)
}

/// Serves one request after `initialize` (and `ping` at any time).
pub(crate) async fn call(
    state: &AppState,
    access: &Access,
    method: &str,
    params: &Value,
) -> Result<Value, RpcError> {
    match method {
        "ping" => Ok(json!({})),
        "tools/list" => Ok(tools::list(state.config.limits.max_top_k)),
        "tools/call" => {
            let name = params
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| RpcError::new(INVALID_PARAMS, "tools/call needs a tool name"))?;
            let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
            tools::call(state, access, name, arguments).await
        }
        "initialize" => Err(RpcError::new(
            super::jsonrpc::INVALID_REQUEST,
            "already initialized",
        )),
        other => Err(RpcError::new(
            METHOD_NOT_FOUND,
            format!("method {other:?} is not served here"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_revision_is_echoed_and_an_unknown_one_gets_the_newest() {
        assert_eq!(negotiate(Some("2025-03-26")), "2025-03-26");
        assert_eq!(negotiate(Some("2024-11-05")), "2024-11-05");
        assert_eq!(negotiate(Some("2031-01-01")), "2025-11-25");
        assert_eq!(negotiate(None), "2025-11-25");
        let (r, v) = initialize(&json!({ "protocolVersion": "2025-06-18" }));
        assert_eq!(v, "2025-06-18");
        assert_eq!(r["protocolVersion"], "2025-06-18");
        assert_eq!(r["capabilities"]["tools"]["listChanged"], false);
    }
}
