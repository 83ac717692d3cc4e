//! The embedding map: a knowledge base's vectors laid out in 2-D (UMAP,
//! `umap.rs`, up to [`UMAP_UP_TO`] passages; PCA, `pca.rs`, above), cached
//! in the application state by commit sequence, with a query placed on it.

use super::pca::{dot, pca2, project, unit, MapPoint, Projection};
use super::umap;
use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use rag_core::{PassageId, TenantId};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::ToSchema;

/// The projection of the passages `viewer` may see: owner-restricted
/// documents appear on their owner's map only (one cached map per owner).
async fn projection(
    state: &AppState,
    tenant: &TenantId,
    kb: &rag_core::KnowledgeBase,
    viewer: &rag_core::Viewer,
) -> Result<Option<Arc<Projection>>, ApiError> {
    let key = (
        tenant.0.clone(),
        format!("{}/{}", kb.id, viewer.row_owner().unwrap_or_default()),
    );
    // The commit sequence first: a cached projection needs no vectors loaded.
    let seq = state.engine.store().kb_seq(tenant, kb.id).await?;
    if let Some(p) = state.maps.get(&key, seq) {
        return Ok(Some(p));
    }
    let sample = state
        .engine
        .map_sample(tenant, kb, viewer, MAP_POINTS)
        .await?;
    let Some(space) = sample.space.clone() else {
        return Ok(None);
    };
    let computed = tokio::task::spawn_blocking(move || {
        let mut rows = Vec::new();
        let mut points = Vec::new();
        for (p, v) in &sample.passages {
            rows.push(unit(v));
            let kind = match p.id {
                PassageId::Chunk(_) => "chunk",
                PassageId::Faq(_) => "faq",
                PassageId::Fact(_) => "fact",
            }
            .to_owned();
            let group = match (&p.source, kind.as_str()) {
                (_, "faq") => "FAQ".to_owned(),
                (Some(s), _) => s.clone(),
                (None, k) => k.to_owned(),
            };
            let language = match rag_text::detect_language(&format!("{} {}", p.title, p.body)) {
                rag_core::Language::Zh => "zh",
                rag_core::Language::En => "en",
                rag_core::Language::Mixed => "mixed",
                _ => "other",
            }
            .to_owned();
            points.push(MapPoint {
                id: p.id,
                kind,
                title: p.title.clone(),
                group,
                language,
                x: 0.0,
                y: 0.0,
            });
        }
        if rows.is_empty() {
            return None;
        }
        let (mean, axes, explained) = pca2(&rows, space.dims);
        let mut proj = Projection {
            seq: sample.seq,
            visible: sample.visible,
            sampled: sample.sampled,
            note: sample.note.clone(),
            model_id: space.model_id.clone(),
            mean,
            axes,
            explained,
            method: "pca",
            vectors: rows,
            points,
        };
        let mut coords: Vec<(f32, f32)> = proj.vectors.iter().map(|v| project(&proj, v)).collect();
        if proj.vectors.len() <= UMAP_UP_TO {
            coords = umap::layout(&proj.vectors, &coords);
            proj.method = "umap";
            // A layout's axes explain no share of the variance.
            proj.explained = [0.0, 0.0];
        }
        for (pt, (x, y)) in proj.points.iter_mut().zip(coords) {
            pt.x = x;
            pt.y = y;
        }
        Some(Arc::new(proj))
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?;
    if let Some(p) = &computed {
        state.maps.put(key, p.clone());
    }
    Ok(computed)
}

/// Passages up to which the map is a UMAP layout (neighbours kept
/// together); above, the PCA projection, whose cost grows linearly.
const UMAP_UP_TO: usize = 20_000;
/// Passages the map shows at most: a larger knowledge base is drawn from a
/// fixed sample of this many (`Engine::map_sample`), so the server reads
/// and keeps that many vectors, whatever the knowledge base's size.
const MAP_POINTS: usize = 50_000;
/// Nearest passages whose places, weighted by cosine, place a query on a
/// UMAP layout (a layout has no formula for new points).
const PLACE_BY: usize = 5;

/// A nearest passage of the query.
#[derive(Debug, Serialize, ToSchema)]
pub struct MapNeighbour {
    /// Index into `points`.
    pub point: usize,
    /// Cosine similarity.
    pub cosine: f64,
}

/// The query on the map.
#[derive(Debug, Serialize, ToSchema)]
pub struct MapQueryPoint {
    /// First coordinate: on a UMAP layout the cosine-weighted mean of its
    /// nearest passages' places, on PCA its projection.
    pub x: f32,
    /// Second coordinate.
    pub y: f32,
    /// Its nearest passages by cosine, best first.
    pub nearest: Vec<MapNeighbour>,
}

/// A 2-D projection of a knowledge base's vectors.
#[derive(Debug, Serialize, ToSchema)]
pub struct EmbeddingMap {
    /// The embedding model of the vectors (none when the knowledge base has none).
    pub model_id: Option<String>,
    /// How the points were placed: `umap` (neighbours kept together; up to
    /// 20,000 passages) or `pca` (the two principal axes; larger knowledge
    /// bases). Empty when there are no vectors.
    pub method: String,
    /// Share of the variance along each principal axis (PCA only; zeros for UMAP).
    pub explained: [f64; 2],
    /// Every passage with a vector, or a fixed sample of 50,000 of them in
    /// a larger knowledge base (the notes say so).
    pub points: Vec<MapPoint>,
    /// The query, when one was given and an embedder is configured.
    pub query: Option<MapQueryPoint>,
    /// Why something is missing.
    pub notes: Vec<String>,
}

/// Optional query for the map.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct MapParams {
    /// A query to place on the map with lines to its nearest passages.
    pub query: Option<String>,
    /// How many nearest passages (default 5, at most 50).
    pub k: Option<usize>,
}

/// The knowledge base's vectors laid out in 2-D, by UMAP up to 20,000
/// passages and by PCA above, at most 50,000 of them (a larger knowledge
/// base is drawn from a fixed sample; cached, recomputed when the
/// knowledge base changes), with an optional query placed on it.
#[utoipa::path(get, path = "/kbs/{kb}/map", tag = "workbench", params(("kb" = String, Path), MapParams),
    responses((status = 200, body = EmbeddingMap), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub(super) async fn embedding_map(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    Query(params): Query<MapParams>,
) -> Result<Json<EmbeddingMap>, ApiError> {
    let kb_row = state.engine.kb(&caller.tenant, &kb).await?;
    let Some(p) = projection(&state, &caller.tenant, &kb_row, &caller.viewer()).await? else {
        return Ok(Json(EmbeddingMap {
            model_id: None,
            method: String::new(),
            explained: [0.0, 0.0],
            points: vec![],
            query: None,
            notes: vec!["this knowledge base has no vectors (no embedder was configured when it was ingested)".into()],
        }));
    };
    let mut notes: Vec<String> = p.note.iter().cloned().collect();
    if p.sampled {
        notes.push(format!(
            "a fixed sample of {} of the {} passages is shown",
            p.points.len(),
            p.visible
        ));
    }
    let mut query = None;
    if let Some(q) = params
        .query
        .as_deref()
        .map(str::trim)
        .filter(|q| !q.is_empty())
    {
        state.engine.check_query(q)?;
        match state.engine.embedder() {
            None => notes.push("no embedder is configured: the query cannot be placed".into()),
            Some(e) => {
                // A failing provider is reported, not turned into a server error.
                match e.embed_query(q).await.map(|v| unit(&v)) {
                    Err(err) => notes.push(format!("the query could not be embedded: {err}")),
                    Ok(v) if v.len() != p.mean.len() => notes.push(format!(
                        "the embedder's vectors ({}) do not match the stored ones ({})",
                        v.len(),
                        p.mean.len()
                    )),
                    Ok(v) => {
                        let k = params.k.unwrap_or(5).clamp(1, 50);
                        let mut scored: Vec<(usize, f64)> = p
                            .vectors
                            .iter()
                            .enumerate()
                            .map(|(i, r)| (i, dot(r, &v)))
                            .collect();
                        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                        let (x, y) = if p.method == "umap" {
                            place(&p.points, &scored[..scored.len().min(PLACE_BY)])
                        } else {
                            project(&p, &v)
                        };
                        let nearest = scored
                            .into_iter()
                            .take(k)
                            .map(|(point, cosine)| MapNeighbour { point, cosine })
                            .collect();
                        query = Some(MapQueryPoint { x, y, nearest });
                    }
                }
            }
        }
    }
    Ok(Json(EmbeddingMap {
        // The stored model id holds the provider's base URL.
        model_id: Some(crate::redact::redact_url(&p.model_id)),
        method: p.method.to_owned(),
        explained: p.explained,
        points: p.points.clone(),
        query,
        notes,
    }))
}

/// A query's place on a layout: the mean of its nearest passages' places,
/// weighted by cosine (at least a small positive weight each).
fn place(points: &[MapPoint], nearest: &[(usize, f64)]) -> (f32, f32) {
    let (mut x, mut y, mut total) = (0.0f64, 0.0f64, 0.0f64);
    for &(i, cosine) in nearest {
        let w = cosine.max(1e-3);
        x += w * f64::from(points[i].x);
        y += w * f64::from(points[i].y);
        total += w;
    }
    if total > 0.0 {
        ((x / total) as f32, (y / total) as f32)
    } else {
        (0.0, 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(x: f32, y: f32) -> MapPoint {
        MapPoint {
            id: PassageId::Faq(rag_core::FaqId::generate()),
            kind: "faq".into(),
            title: String::new(),
            group: "FAQ".into(),
            language: "en".into(),
            x,
            y,
        }
    }

    #[test]
    fn a_query_sits_among_its_nearest_passages_weighted_by_cosine() {
        let points = vec![at(0.0, 0.0), at(4.0, 0.0), at(100.0, 100.0)];
        // Three times the cosine: three quarters of the way to the first.
        let (x, y) = place(&points, &[(0, 0.9), (1, 0.3)]);
        assert!((x - 1.0).abs() < 1e-5 && y.abs() < 1e-5, "{x} {y}");
        // A negative cosine counts as almost nothing, not as a push away.
        let (x, _) = place(&points, &[(1, 0.5), (2, -0.8)]);
        assert!(x > 4.0 && x < 4.5, "{x}");
        assert_eq!(place(&points, &[]), (0.0, 0.0));
    }
}
