//! The routes under `/api/v1`. Each handler is scoped to its caller's tenant:
//! the tenant is passed to the engine and from there into every store query,
//! so another tenant's names and ids simply do not exist (404).

mod admin;
mod documents;
mod eval;
mod faqs;
mod intents;
mod kbs;
mod lexicon;
mod paging;
pub(crate) mod query;
mod why_not;

use crate::state::AppState;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// All `/api/v1` routes with their OpenAPI descriptions.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(query::query_stream))
        .routes(routes!(query::query_json))
        .routes(routes!(query::retrieve))
        .routes(routes!(query::refuse))
        .routes(routes!(why_not::why_not))
        .routes(routes!(eval::run_eval))
        .routes(routes!(kbs::list_kbs, kbs::create_kb))
        .routes(routes!(kbs::get_kb, kbs::delete_kb))
        .routes(routes!(kbs::put_settings))
        .routes(routes!(intents::get_intents, intents::put_intents))
        .routes(routes!(documents::list_documents, documents::upload))
        .routes(routes!(documents::get_document, documents::delete_document))
        .routes(routes!(crate::drafts::draft_faqs))
        .routes(routes!(faqs::list_faqs, faqs::create_faq))
        .routes(routes!(faqs::get_faq, faqs::edit_faq, faqs::delete_faq))
        .routes(routes!(faqs::approve_faq))
        .routes(routes!(faqs::disable_faq))
        .routes(routes!(lexicon::get_lexicon))
        .routes(routes!(lexicon::add_synonyms))
        .routes(routes!(lexicon::add_dictionary))
        .routes(routes!(lexicon::put_facts))
        .routes(routes!(lexicon::delete_fact))
        .routes(routes!(admin::list_tenants, admin::create_tenant))
        .routes(routes!(admin::list_keys, admin::create_api_key))
        .routes(routes!(admin::revoke_key))
        .routes(routes!(crate::ops::list_log))
        .routes(routes!(crate::ops::get_log))
        .routes(routes!(crate::ops::feedback))
        .routes(routes!(query::replay))
        .routes(routes!(crate::ops::faq_tool))
        .routes(routes!(crate::ops::analytics))
        .routes(routes!(
            crate::sources::list_sources,
            crate::sources::add_source
        ))
        .routes(routes!(
            crate::sources::get_source,
            crate::sources::delete_source
        ))
        .routes(routes!(crate::sources::sync_source))
        .routes(routes!(crate::ops::list_conversations))
        .routes(routes!(
            crate::ops::get_conversation,
            crate::ops::delete_conversation
        ))
        .merge(crate::web::api_routes())
}

/// One Server-Sent Event as streamed: `event:` names the type, `data:` holds its JSON.
#[derive(Debug, Serialize, ToSchema)]
pub struct SseEvent {
    /// The event type (query_received, recall, …; received, stage, indexed, … for uploads).
    pub event: String,
    /// The event as JSON text.
    pub data: String,
}
