//! The workbench: a browser UI served by the server itself.
//!
//! The page and its ES modules are embedded in the binary (`assets/`, plain
//! JavaScript, no build step and nothing third-party). Every page talks to the
//! same `/api/v1` routes as any other client. Browsers authenticate either in
//! open mode (loopback, no key) or with a session cookie set by
//! `POST /api/v1/session` after the page asked for an API key once; see
//! [`crate::auth`] for the CSRF rule on writes.

mod assets;
mod map;
pub(crate) mod pca;
mod session;
mod system;
mod umap;

use crate::state::AppState;
use axum::routing::get;
use axum::Router;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The page and its assets (outside `/api`), the embeddable chat widget
/// (`/widget.js`) and a mock shop page showing it (`/widget-demo`).
pub(crate) fn pages() -> Router<AppState> {
    Router::new()
        .route("/", get(assets::index))
        .route("/assets/{name}", get(assets::asset))
        .route(
            "/widget.js",
            get(|| async {
                assets::with_headers("text/javascript; charset=utf-8", assets::WIDGET_JS)
            }),
        )
        .route(
            "/widget-demo",
            get(|| async { assets::with_headers("text/html; charset=utf-8", assets::WIDGET_DEMO) }),
        )
}

/// Workbench routes under `/api/v1` (listed in the OpenAPI document).
pub(crate) fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(session::whoami, session::login, session::logout))
        .routes(routes!(map::embedding_map))
        .routes(routes!(system::system_info))
        .routes(routes!(system::test_embedder))
        .routes(routes!(system::test_llm))
        .routes(routes!(system::test_reranker))
}
