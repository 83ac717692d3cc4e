//! Dify's external knowledge API: `POST /dify/retrieval`, so the endpoint
//! to register in Dify is `http://HOST:3210/dify`.
//!
//! The request is `{knowledge_id, query, retrieval_setting: {top_k,
//! score_threshold}, metadata_condition?}` with `knowledge_id` the knowledge
//! base's name; the answer is `{records: [{content, score, title,
//! metadata}]}` with `score` the normalised fused score (0–1) and
//! `metadata` always an object. `metadata_condition` maps onto our filters
//! where it can: conditions on `tags` (`contains`, `is`, `=`: the tag must
//! be present) and on `created_at` (`before`, `after`, `<`, `>`, `≤`, `≥`
//! with unix seconds), joined by `and`; any other condition is refused
//! with a message naming it, never ignored.
//!
//! Errors are `{error_code, error_msg}`: 1001 a missing or malformed
//! `Authorization` header, 1002 a key that is refused, 2001 an unknown
//! knowledge base (or one outside the key's scope); any other error has its
//! HTTP status (from the one error table) as its code.

use crate::api::query::FilterBody;
use crate::error::ApiError;
use crate::protocols::access::{self, Denied};
use crate::protocols::service;
use crate::state::AppState;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

/// The `/dify` route.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/dify/retrieval", post(retrieval))
}

#[derive(Debug, Deserialize)]
struct RetrievalRequest {
    knowledge_id: String,
    query: String,
    retrieval_setting: RetrievalSetting,
    #[serde(default)]
    metadata_condition: Option<MetadataCondition>,
}

#[derive(Debug, Deserialize)]
struct RetrievalSetting {
    top_k: usize,
    #[serde(default)]
    score_threshold: Option<f64>,
}

#[derive(Debug, Deserialize)]
struct MetadataCondition {
    #[serde(default)]
    logical_operator: Option<String>,
    #[serde(default)]
    conditions: Vec<Condition>,
}

#[derive(Debug, Deserialize)]
struct Condition {
    name: Names,
    comparison_operator: String,
    #[serde(default)]
    value: Option<Value>,
}

/// Dify sends a list of names; one name alone is taken too.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Names {
    One(String),
    Many(Vec<String>),
}

impl Names {
    fn list(&self) -> Vec<&str> {
        match self {
            Names::One(n) => vec![n.as_str()],
            Names::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

/// An error in Dify's shape.
struct DifyError {
    status: StatusCode,
    code: u32,
    message: String,
}

impl DifyError {
    fn bad(message: impl Into<String>) -> Self {
        DifyError {
            status: StatusCode::BAD_REQUEST,
            code: 400,
            message: message.into(),
        }
    }
}

impl From<ApiError> for DifyError {
    fn from(e: ApiError) -> Self {
        let code = match e.code {
            "unknown_kb" => 2001,
            "invalid_key" | "key_revoked" | "forbidden" => 1002,
            "missing_key" => 1001,
            _ => u32::from(e.status.as_u16()),
        };
        DifyError {
            status: e.status,
            code,
            message: e.message,
        }
    }
}

impl From<Denied> for DifyError {
    fn from(d: Denied) -> Self {
        let e = d.error();
        let code = match d {
            Denied::Missing | Denied::Malformed => 1001,
            Denied::Refused(_) => 1002,
        };
        DifyError {
            status: e.status,
            code,
            message: e.message,
        }
    }
}

impl IntoResponse for DifyError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(json!({ "error_code": self.code, "error_msg": self.message })),
        )
            .into_response()
    }
}

/// Our filters for Dify's metadata conditions, or the reason they cannot be.
fn filters(condition: Option<&MetadataCondition>) -> Result<Option<FilterBody>, DifyError> {
    let Some(mc) = condition.filter(|c| !c.conditions.is_empty()) else {
        return Ok(None);
    };
    let op = mc.logical_operator.as_deref().unwrap_or("and");
    if !op.eq_ignore_ascii_case("and") && mc.conditions.len() > 1 {
        return Err(DifyError::bad(format!(
            "metadata_condition: logical_operator {op:?} is not supported; conditions are joined by \"and\""
        )));
    }
    let mut f = FilterBody::default();
    for c in &mc.conditions {
        let cmp = c.comparison_operator.trim();
        for name in c.names() {
            match name {
                "tag" | "tags" => {
                    if !matches!(cmp, "contains" | "is" | "=") {
                        return Err(DifyError::bad(format!(
                            "metadata_condition: {name:?} supports contains, is and =, not {cmp:?}"
                        )));
                    }
                    let tag = match &c.value {
                        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
                        _ => {
                            return Err(DifyError::bad(format!(
                                "metadata_condition: {name:?} needs a tag as its value"
                            )))
                        }
                    };
                    f.tags.push(tag);
                }
                "created_at" => {
                    let t = seconds(c.value.as_ref()).ok_or_else(|| {
                        DifyError::bad(
                            "metadata_condition: \"created_at\" needs unix seconds as its value",
                        )
                    })?;
                    match cmp {
                        "after" | ">" => f.created_after = Some(t.saturating_add(1)),
                        "≥" | ">=" => f.created_after = Some(t),
                        "before" | "<" => f.created_before = Some(t.saturating_sub(1)),
                        "≤" | "<=" => f.created_before = Some(t),
                        _ => {
                            return Err(DifyError::bad(format!(
                                "metadata_condition: \"created_at\" supports before, after, <, >, ≤ and ≥, not {cmp:?}"
                            )))
                        }
                    }
                }
                other => {
                    return Err(DifyError::bad(format!(
                        "metadata_condition: {other:?} cannot be filtered on; only \"tags\" and \"created_at\" can"
                    )))
                }
            }
        }
    }
    Ok(Some(f))
}

impl Condition {
    fn names(&self) -> Vec<&str> {
        self.name.list()
    }
}

fn seconds(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

async fn retrieval(State(state): State<AppState>, req: Request) -> Response {
    match retrieve(&state, req).await {
        Ok(v) => Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn retrieve(state: &AppState, req: Request) -> Result<Value, DifyError> {
    let (parts, body) = req.into_parts();
    let access = access::resolve(state, &parts).await?;
    let r: RetrievalRequest = super::read_json(state, body).await?;
    let filters = filters(r.metadata_condition.as_ref())?;
    let top_k = r
        .retrieval_setting
        .top_k
        .clamp(1, state.config.limits.max_top_k);
    let threshold = r.retrieval_setting.score_threshold.unwrap_or(0.0);
    let found = service::search(
        state,
        &access,
        &r.knowledge_id,
        r.query,
        Some(top_k),
        filters,
    )
    .await?;
    let records: Vec<Value> = found
        .hits
        .into_iter()
        .filter(|h| h.score >= threshold)
        .map(|h| {
            let mut metadata = json!({ "id": h.id, "kind": h.kind, "rank": h.rank });
            if let Some(s) = h.source {
                metadata["source"] = json!(s);
            }
            json!({ "content": h.text, "score": h.score, "title": h.title, "metadata": metadata })
        })
        .collect();
    Ok(json!({ "records": records }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(v: Value) -> Result<Option<FilterBody>, DifyError> {
        let mc: MetadataCondition = serde_json::from_value(v).unwrap();
        filters(Some(&mc))
    }

    #[test]
    fn metadata_conditions_map_onto_filters_or_are_refused() {
        let f = condition(json!({ "logical_operator": "and", "conditions": [
            { "name": ["tags"], "comparison_operator": "contains", "value": "售后" },
            { "name": ["created_at"], "comparison_operator": "after", "value": 100 },
            { "name": "created_at", "comparison_operator": "≤", "value": "200" }
        ]}))
        .ok()
        .flatten()
        .unwrap();
        assert_eq!(f.tags, vec!["售后"]);
        assert_eq!((f.created_after, f.created_before), (Some(101), Some(200)));
        assert!(condition(json!({ "conditions": [] }))
            .ok()
            .unwrap()
            .is_none());
        for bad in [
            json!({ "conditions": [{ "name": ["author"], "comparison_operator": "is", "value": "x" }] }),
            json!({ "conditions": [{ "name": ["tags"], "comparison_operator": "not contains", "value": "x" }] }),
            json!({ "conditions": [{ "name": ["created_at"], "comparison_operator": "after", "value": "soon" }] }),
            json!({ "logical_operator": "or", "conditions": [
                { "name": ["tags"], "comparison_operator": "is", "value": "a" },
                { "name": ["tags"], "comparison_operator": "is", "value": "b" }
            ]}),
        ] {
            let e = condition(bad).err().unwrap();
            assert_eq!((e.status, e.code), (StatusCode::BAD_REQUEST, 400));
            assert!(e.message.starts_with("metadata_condition"), "{}", e.message);
        }
    }
}
