//! FAQ entries drafted from a document by the configured LLM
//! (`POST /kbs/{kb}/documents/{id}/faq-drafts`).

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use rag_core::{DocId, FaqEntry};
use rag_engine::{DraftFailure, DraftOutcome};
use serde::Serialize;
use utoipa::ToSchema;

/// What drafting stored and left out.
#[derive(Debug, Serialize, ToSchema)]
pub struct FaqDrafts {
    /// The document drafted from.
    pub document: DocId,
    /// The entries stored, linked to the document (`source_doc`), with the
    /// status the knowledge base's `drafts.status` setting gives.
    pub added: Vec<FaqEntry>,
    /// Why each other entry of the LLM's reply was left out ("entry 3: no answer").
    pub dropped: Vec<String>,
    /// Repairs made to read the reply (trailing commas, a bare array…).
    pub repairs: Vec<String>,
    /// Earlier drafts of the document that nobody edited, replaced by these.
    pub replaced: usize,
    /// The language the pairs were asked for: `zh` or `en` (the document's).
    pub language: String,
    /// Whether only the beginning of a long document was sent.
    pub clipped: bool,
    /// The LLM that drafted them.
    pub generator: String,
}

impl From<DraftOutcome> for FaqDrafts {
    fn from(o: DraftOutcome) -> Self {
        let language = serde_json::to_value(o.language)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        FaqDrafts {
            document: o.document,
            added: o.added,
            dropped: o.dropped,
            repairs: o.repairs,
            replaced: o.replaced,
            language,
            clipped: o.clipped,
            generator: o.generator,
        }
    }
}

impl From<DraftFailure> for ApiError {
    fn from(e: DraftFailure) -> Self {
        let code = e.code();
        match e {
            DraftFailure::NoLlm | DraftFailure::Restricted { .. } => {
                ApiError::new(StatusCode::CONFLICT, code, e.to_string())
            }
            // The provider's fault, not ours and not the caller's.
            DraftFailure::Provider(_) | DraftFailure::Rejected(_) => {
                ApiError::new(StatusCode::BAD_GATEWAY, code, e.to_string())
            }
            DraftFailure::Core(core) => core.into(),
            other => ApiError::internal(other),
        }
    }
}

/// Asks the configured LLM for FAQ pairs drafted from a document and stores
/// them as FAQ entries linked to it; the document's earlier drafts that
/// nobody edited are replaced in the same write (edited ones are kept).
/// Entries of the reply without a question or an answer are left out, each
/// with its reason. 409 `no_llm` without an LLM; 409 `restricted_document`
/// for a document restricted to an owner (FAQ entries are visible to the
/// whole tenant); 502 `llm_failed` when the LLM cannot be reached or fails;
/// 502 `drafts_rejected` when its reply holds no usable pair (invalid JSON,
/// no entries, every entry incomplete); earlier drafts are kept then.
#[utoipa::path(post, path = "/kbs/{kb}/documents/{id}/faq-drafts", tag = "documents", params(("kb" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = FaqDrafts), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 502, body = ErrorBody)))]
pub(crate) async fn draft_faqs(
    State(state): State<AppState>,
    caller: Caller,
    Path((kb, id)): Path<(String, String)>,
) -> Result<Json<FaqDrafts>, ApiError> {
    caller.require_write()?;
    let doc = DocId::parse(&id)
        .ok_or_else(|| ApiError::not_found(format!("document {id:?} not found")))?;
    Ok(Json(
        state
            .engine
            .draft_faqs(&caller.tenant, &kb, doc, &caller.viewer())
            .await?
            .into(),
    ))
}
