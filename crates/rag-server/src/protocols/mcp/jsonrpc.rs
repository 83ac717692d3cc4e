//! JSON-RPC 2.0 messages as MCP uses them: one message per line (stdio) or
//! per POST (streamable HTTP). Batches (allowed only by the 2025-03-26
//! revision, removed since) are refused.

use serde_json::{json, Value};

/// Invalid JSON.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// Not a valid request object.
pub(crate) const INVALID_REQUEST: i64 = -32600;
/// Unknown method.
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
/// Bad parameters of a known method.
pub(crate) const INVALID_PARAMS: i64 = -32602;
/// The server failed.
pub(crate) const INTERNAL_ERROR: i64 = -32603;
/// Authentication needed or refused (implementation-defined range).
pub(crate) const UNAUTHORIZED: i64 = -32001;

/// A message from the client.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Incoming {
    /// A request: it gets exactly one response.
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// A notification: no response.
    Notification { method: String },
    /// A response to a request of ours (we send none), ignored.
    Response,
}

/// An error response to send back.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub(crate) fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
        }
    }
}

/// Parses one message; `Err` carries the error response to send (with the
/// request's id when it could be read, else `null`).
pub(crate) fn parse(bytes: &[u8]) -> Result<Incoming, Value> {
    let v: Value = serde_json::from_slice(bytes)
        .map_err(|e| error(&Value::Null, PARSE_ERROR, &format!("not JSON: {e}")))?;
    let Value::Object(o) = &v else {
        let why = if v.is_array() {
            "batches are not supported: send one message at a time"
        } else {
            "a JSON-RPC message is an object"
        };
        return Err(error(&Value::Null, INVALID_REQUEST, why));
    };
    let id = o.get("id").cloned();
    if o.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(error(
            id.as_ref().unwrap_or(&Value::Null),
            INVALID_REQUEST,
            "jsonrpc must be \"2.0\"",
        ));
    }
    match (o.get("method"), id) {
        (Some(Value::String(m)), Some(id)) if id.is_string() || id.is_number() => {
            let params = o.get("params").cloned().unwrap_or(Value::Null);
            if !(params.is_null() || params.is_object()) {
                return Err(error(&id, INVALID_PARAMS, "params must be an object"));
            }
            Ok(Incoming::Request {
                id,
                method: m.clone(),
                params,
            })
        }
        (Some(Value::String(m)), None) => Ok(Incoming::Notification { method: m.clone() }),
        (None, Some(_)) if o.contains_key("result") || o.contains_key("error") => {
            Ok(Incoming::Response)
        }
        (_, id) => Err(error(
            id.as_ref().unwrap_or(&Value::Null),
            INVALID_REQUEST,
            "not a request, notification or response",
        )),
    }
}

/// A success response.
pub(crate) fn result(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// An error response.
pub(crate) fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

/// The response to a request from its outcome.
pub(crate) fn respond(id: &Value, outcome: Result<Value, RpcError>) -> Value {
    match outcome {
        Ok(v) => result(id, v),
        Err(e) => error(id, e.code, &e.message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_told_apart_and_bad_ones_answered() {
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Ok(Incoming::Request {
                id: json!(1),
                method: "ping".into(),
                params: Value::Null
            })
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Incoming::Notification {
                method: "notifications/initialized".into()
            })
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#),
            Ok(Incoming::Response)
        );
        let e = parse(b"{nope").unwrap_err();
        assert_eq!(e["error"]["code"], PARSE_ERROR);
        assert_eq!(e["id"], Value::Null);
        let e = parse(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#).unwrap_err();
        assert_eq!(e["error"]["code"], INVALID_REQUEST);
        let e = parse(br#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#).unwrap_err();
        assert_eq!(
            (e["id"].clone(), e["error"]["code"].clone()),
            (json!(7), json!(INVALID_REQUEST))
        );
        let e = parse(br#"{"jsonrpc":"2.0","id":7,"method":"x","params":[1]}"#).unwrap_err();
        assert_eq!(e["error"]["code"], INVALID_PARAMS);
    }
}
