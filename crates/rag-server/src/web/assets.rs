//! The workbench's page, its ES modules and styles, and the chat widget,
//! embedded in the binary and served with a strict content security policy.

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// An embedded file: name under `/assets/`, content type, bytes.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const INDEX_HTML: &str = include_str!("../../assets/index.html");

const ASSETS: &[Asset] = &[
    Asset {
        name: "app.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../../assets/app.css"),
    },
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/app.js"),
    },
    Asset {
        name: "core.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/core.js"),
    },
    Asset {
        name: "ask.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/ask.js"),
    },
    Asset {
        name: "lab.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/lab.js"),
    },
    Asset {
        name: "corpus.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/corpus.js"),
    },
    Asset {
        name: "ingest.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/ingest.js"),
    },
    Asset {
        name: "map.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/map.js"),
    },
    Asset {
        name: "widget.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../../assets/widget.css"),
    },
    Asset {
        name: "widget-demo.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../../assets/widget-demo.css"),
    },
    Asset {
        name: "settings.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/settings.js"),
    },
    Asset {
        name: "insights.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/insights.js"),
    },
    Asset {
        name: "eval.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/eval.js"),
    },
];

/// Scripts and styles come from this origin only; no inline script or handler
/// can run, so even a rendering bug could not execute a document's HTML.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
                   form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

pub(super) fn with_headers(content_type: &'static str, body: &'static str) -> Response {
    let mut res = body.into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    res
}

pub(super) async fn index() -> Response {
    with_headers("text/html; charset=utf-8", INDEX_HTML)
}

pub(super) async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|a| a.name == name) {
        Some(a) => with_headers(a.content_type, a.body),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

pub(super) const WIDGET_JS: &str = include_str!("../../assets/widget.js");
pub(super) const WIDGET_DEMO: &str = include_str!("../../assets/widget-demo.html");
