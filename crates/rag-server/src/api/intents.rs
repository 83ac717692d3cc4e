//! Intent routes of a knowledge base: questions matched to an intent are
//! answered by its webhook (see rag-engine's `intents.rs`).

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiJson;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::Json;
use rag_core::{Intent, Role};

/// Sets who may reach a private webhook: only intents saved by an admin key
/// may (whatever the body says); any other caller naming a loopback or
/// private address is refused. An intent sent back unchanged (as a settings
/// page saving the whole settings does) keeps what it had.
pub(crate) fn stamp_intents(
    caller: &Caller,
    intents: &mut [Intent],
    current: &[Intent],
) -> Result<(), ApiError> {
    let admin = caller.role == Role::Admin;
    for i in intents.iter_mut() {
        let unchanged = current.iter().find(|c| {
            c.name == i.name
                && c.webhook == i.webhook
                && c.examples == i.examples
                && c.threshold == i.threshold
                && c.timeout_ms == i.timeout_ms
        });
        if let Some(c) = unchanged.filter(|_| !admin) {
            i.private_ok = c.private_ok;
            continue;
        }
        if !admin && rag_core::webhook_is_local(&i.webhook) {
            return Err(ApiError::forbidden(format!(
                "intent {:?}: only an admin key may point a webhook at a loopback or private address",
                i.name
            )));
        }
        i.private_ok = admin;
    }
    Ok(())
}

/// The knowledge base's intents.
#[utoipa::path(get, path = "/kbs/{kb}/intents", tag = "kbs", params(("kb" = String, Path)),
    responses((status = 200, body = Vec<Intent>), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn get_intents(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
) -> Result<Json<Vec<Intent>>, ApiError> {
    Ok(Json(
        state.engine.kb(&caller.tenant, &kb).await?.settings.intents,
    ))
}

/// Replaces the knowledge base's intents (its other settings are kept).
/// Each has example questions, a webhook URL, a threshold (0–1, default
/// 0.7) and a timeout (default 3,000 ms). A webhook on a loopback or
/// private address needs an admin key.
#[utoipa::path(put, path = "/kbs/{kb}/intents", tag = "kbs", params(("kb" = String, Path)), request_body = Vec<Intent>,
    responses((status = 200, body = Vec<Intent>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub(super) async fn put_intents(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    ApiJson(mut intents): ApiJson<Vec<Intent>>,
) -> Result<Json<Vec<Intent>>, ApiError> {
    caller.require_write()?;
    rag_core::validate_intents(&intents).map_err(rag_core::CoreError::from)?;
    let current = state.engine.kb(&caller.tenant, &kb).await?.settings.intents;
    stamp_intents(&caller, &mut intents, &current)?;
    let kb = state
        .engine
        .set_intents(&caller.tenant, &kb, intents)
        .await?;
    Ok(Json(kb.settings.intents))
}
