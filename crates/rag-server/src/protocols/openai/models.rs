//! `GET /v1/models` (one model per knowledge base the key sees, id = its
//! name) and `GET /v1/models/{model}`.

use super::error::OpenAiError;
use super::openai_caller;
use crate::protocols::service::{self, KbSummary};
use crate::state::AppState;
use axum::extract::{Path, Request, State};
use axum::Json;
use serde_json::{json, Value};

fn model(kb: &KbSummary) -> Value {
    json!({ "id": kb.name, "object": "model", "created": kb.created_at, "owned_by": "ragscope" })
}

pub(super) async fn list_models(
    State(state): State<AppState>,
    req: Request,
) -> Result<Json<Value>, OpenAiError> {
    let (parts, _) = req.into_parts();
    let access = openai_caller(&state, &parts).await?;
    let kbs = service::list_kbs(&state, &access).await?;
    Ok(Json(json!({
        "object": "list",
        "data": kbs.iter().map(model).collect::<Vec<_>>(),
    })))
}

pub(super) async fn get_model(
    State(state): State<AppState>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<Value>, OpenAiError> {
    let (parts, _) = req.into_parts();
    let access = openai_caller(&state, &parts).await?;
    access.check_kb(&name)?;
    let kbs = service::list_kbs(&state, &access).await?;
    kbs.iter()
        .find(|k| k.name == name)
        .map(|k| Json(model(k)))
        .ok_or_else(|| {
            crate::error::ApiError::from(rag_core::CoreError::from(
                rag_core::UserError::UnknownKb { name },
            ))
            .into()
        })
}
