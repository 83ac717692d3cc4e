//! What the server runs with (models and limits, no secrets) and the admin's
//! connection tests of the embedder, the LLM and the reranker. Provider names
//! hold their base URLs: credentials in them (`user:pass@`, `?api_key=`) are
//! redacted from every answer here.

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::redact::redact_url;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use rag_core::PassageId;
use serde::Serialize;
use utoipa::ToSchema;

/// The configured embedder.
#[derive(Debug, Serialize, ToSchema)]
pub struct EmbedderInfo {
    /// Model id recorded next to stored vectors.
    pub model_id: String,
    /// Vector length.
    pub dimensions: usize,
}

/// What the server runs with (no secrets).
#[derive(Debug, Serialize, ToSchema)]
pub struct SystemInfo {
    /// ragscope's version.
    pub version: String,
    /// Key-less local mode.
    pub open: bool,
    /// The embedder of the dense path, if any.
    pub embedder: Option<EmbedderInfo>,
    /// The LLM answering questions (its name), if any; answers are extractive otherwise.
    pub llm: Option<String>,
    /// The reranker (`identity` when none is configured).
    pub reranker: String,
    /// Largest query, in bytes.
    pub max_query_bytes: usize,
    /// Largest upload, in bytes.
    pub max_upload_bytes: usize,
    /// Largest top-k a request may ask for.
    pub max_top_k: usize,
}

/// The server's models and limits.
#[utoipa::path(get, path = "/system", tag = "workbench", responses((status = 200, body = SystemInfo), (status = 401, body = ErrorBody)))]
pub(super) async fn system_info(
    State(state): State<AppState>,
    _caller: Caller,
) -> Json<SystemInfo> {
    let embedder = state.engine.embedder().map(|e| EmbedderInfo {
        model_id: redact_url(e.model().model_id()),
        dimensions: e.model().dimensions(),
    });
    Json(SystemInfo {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        open: state.config.open,
        embedder,
        llm: state.engine.generator().map(|g| redact_url(g.name())),
        reranker: redact_url(state.engine.reranker().name()),
        max_query_bytes: state.engine.config().max_query_bytes,
        max_upload_bytes: state.config.limits.max_upload_bytes,
        max_top_k: state.config.limits.max_top_k,
    })
}

/// The outcome of a connection test.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConnectionTest {
    /// Whether the provider answered correctly.
    pub ok: bool,
    /// Milliseconds the request took.
    pub ms: f64,
    /// What came back, or what went wrong.
    pub detail: String,
}

/// The test's outcome with any credentials in its detail (provider names
/// and error messages hold URLs) redacted.
fn redacted(mut t: ConnectionTest) -> Json<ConnectionTest> {
    t.detail = redact_url(&t.detail);
    Json(t)
}

/// Embeds a short text with the configured embedder (a real request to the
/// provider) and reports the time and the vector's length. Admin only: it
/// may cost money.
#[utoipa::path(post, path = "/system/test-embedder", tag = "workbench",
    responses((status = 200, body = ConnectionTest), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(super) async fn test_embedder(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<ConnectionTest>, ApiError> {
    caller.require_admin()?;
    let Some(e) = state.engine.embedder() else {
        return Ok(Json(ConnectionTest {
            ok: false,
            ms: 0.0,
            detail: "no embedder is configured".into(),
        }));
    };
    let started = std::time::Instant::now();
    // Not through the cache: the point is to reach the provider.
    let result = e
        .model()
        .embed_query("ragscope connection test 连接测试")
        .await;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    Ok(redacted(match result {
        Ok(v) if v.len() == e.model().dimensions() && v.iter().all(|x| x.is_finite()) => {
            ConnectionTest {
                ok: true,
                ms,
                detail: format!(
                    "{} returned a {}-dimensional vector",
                    e.model().model_id(),
                    v.len()
                ),
            }
        }
        Ok(v) => ConnectionTest {
            ok: false,
            ms,
            detail: format!(
                "expected {} dimensions, got {} (or non-finite values)",
                e.model().dimensions(),
                v.len()
            ),
        },
        Err(err) => ConnectionTest {
            ok: false,
            ms,
            detail: err.to_string(),
        },
    }))
}

/// Asks the configured LLM a one-line question (a real request to the
/// provider) and reports the time, the model that answered and the reply's
/// start. Admin only: it may cost money.
#[utoipa::path(post, path = "/system/test-llm", tag = "workbench",
    responses((status = 200, body = ConnectionTest), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(super) async fn test_llm(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<ConnectionTest>, ApiError> {
    caller.require_admin()?;
    let Some(g) = state.engine.generator() else {
        return Ok(Json(ConnectionTest {
            ok: false,
            ms: 0.0,
            detail: "no LLM is configured: answers are extractive (quoted from the sources)".into(),
        }));
    };
    let request = rag_core::GenerateRequest {
        question: "connection test".into(),
        sources: Vec::new(),
        messages: vec![
            rag_core::ChatMessage::system(
                "You are a connection test. Reply with the single word OK.",
            ),
            rag_core::ChatMessage::user("Reply with OK."),
        ],
        json: false,
    };
    let started = std::time::Instant::now();
    let outcome = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let mut stream = g.generate(request).await?;
        let (mut text, mut model) = (String::new(), None);
        while let Some(ev) = futures::StreamExt::next(&mut stream).await {
            match ev? {
                rag_core::GenEvent::Delta(d) => text.push_str(&d),
                rag_core::GenEvent::Usage { model: m, .. } => model = Some(m),
                rag_core::GenEvent::Done => break,
            }
        }
        Ok::<_, rag_core::CoreError>((text, model))
    })
    .await;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    Ok(redacted(match outcome {
        Err(_) => ConnectionTest {
            ok: false,
            ms,
            detail: "no complete answer within 60 s".into(),
        },
        Ok(Err(e)) => ConnectionTest {
            ok: false,
            ms,
            detail: e.to_string(),
        },
        Ok(Ok((text, _))) if text.trim().is_empty() => ConnectionTest {
            ok: false,
            ms,
            detail: format!("{} answered with no text", g.name()),
        },
        Ok(Ok((text, model))) => {
            let reply: String = text.trim().chars().take(80).collect();
            let who = model.unwrap_or_else(|| g.name().to_owned());
            ConnectionTest {
                ok: true,
                ms,
                detail: format!("{who} replied {reply:?}"),
            }
        }
    }))
}

/// Reranks two short passages with the configured reranker (a real request
/// to the provider) and checks that the relevant one comes first. Admin only.
#[utoipa::path(post, path = "/system/test-reranker", tag = "workbench",
    responses((status = 200, body = ConnectionTest), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(super) async fn test_reranker(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<ConnectionTest>, ApiError> {
    caller.require_admin()?;
    let r = state.engine.reranker();
    if r.name() == "identity" {
        return Ok(Json(ConnectionTest {
            ok: false,
            ms: 0.0,
            detail: "no reranker is configured: the fused order is kept".into(),
        }));
    }
    let raw = "How long does a refund take?";
    // Rerankers read the raw question; the analysis is not needed here.
    let query = rag_core::AnalyzedQuery {
        raw: raw.into(),
        normalized: raw.to_lowercase(),
        language: rag_core::Language::En,
        tokens: Vec::new(),
        key_terms: Vec::new(),
    };
    let candidate = |n: usize, text: &str| rag_core::RerankCandidate {
        hit: rag_core::FusedHit {
            id: PassageId::Faq(rag_core::FaqId::generate()),
            rank: n as u32,
            score: 0.0,
            normalized: 0.0,
            contributions: Vec::new(),
        },
        text: text.to_owned(),
    };
    let candidates = vec![
        candidate(1, "The shop opens at nine every morning and closes at ten."),
        candidate(
            2,
            "Refunds reach the original payment method within three working days.",
        ),
    ];
    let relevant = candidates[1].hit.id;
    let started = std::time::Instant::now();
    let outcome = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        r.rerank(&query, candidates, 2),
    )
    .await;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    Ok(redacted(match outcome {
        Err(_) => ConnectionTest {
            ok: false,
            ms,
            detail: "no answer within 60 s".into(),
        },
        Ok(Err(e)) => ConnectionTest {
            ok: false,
            ms,
            detail: e.to_string(),
        },
        Ok(Ok(out)) if out.first().map(|h| h.hit.id) == Some(relevant) => ConnectionTest {
            ok: true,
            ms,
            detail: format!("{} put the relevant passage first", r.name()),
        },
        Ok(Ok(out)) if out.is_empty() => ConnectionTest {
            ok: false,
            ms,
            detail: format!("{} returned no passages", r.name()),
        },
        Ok(Ok(_)) => ConnectionTest {
            ok: false,
            ms,
            detail: format!(
                "{} answered, but ranked the irrelevant passage first",
                r.name()
            ),
        },
    }))
}
