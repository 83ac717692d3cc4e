//! The 2-D PCA projection of a knowledge base's vectors behind the embedding
//! map, and the cache of projections the application state holds.

use rag_core::PassageId;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use utoipa::ToSchema;

/// A 2-D projection (PCA) of a knowledge base's vectors: two principal axes
/// found by power iteration with deflation over the centred vectors.
pub(crate) struct Projection {
    /// The knowledge base's commit sequence the projection was computed at.
    pub(crate) seq: u64,
    /// Searchable passages the viewer may see.
    pub(crate) visible: usize,
    /// Whether the points are a sample of them (`Engine::map_sample`).
    pub(crate) sampled: bool,
    /// Why vectors are missing, when they are.
    pub(crate) note: Option<String>,
    pub(crate) model_id: String,
    pub(crate) mean: Vec<f32>,
    pub(crate) axes: [Vec<f32>; 2],
    /// Share of the variance along each principal axis (zeros for a UMAP layout).
    pub(crate) explained: [f64; 2],
    /// How the points were placed: `umap` or `pca`.
    pub(crate) method: &'static str,
    /// Normalised vectors, for the query's nearest neighbours.
    pub(crate) vectors: Vec<Vec<f32>>,
    pub(crate) points: Vec<MapPoint>,
}

/// (tenant, knowledge base id and owner) → its latest projection.
type Projections = HashMap<(String, String), Arc<Projection>>;

/// Projections by (tenant, knowledge base id and owner), recomputed when the
/// knowledge base's commit sequence moves.
#[derive(Default)]
pub(crate) struct MapCache {
    maps: Mutex<Projections>,
}

/// Most cached projections.
const MAPS_MAX: usize = 64;

impl MapCache {
    /// The cached projection of `key`, if it was computed at commit sequence `seq`.
    pub(crate) fn get(&self, key: &(String, String), seq: u64) -> Option<Arc<Projection>> {
        let maps = self.maps.lock().unwrap_or_else(|p| p.into_inner());
        maps.get(key).filter(|p| p.seq == seq).cloned()
    }

    /// Keeps a projection; when full, another key's projection makes room.
    pub(crate) fn put(&self, key: (String, String), p: Arc<Projection>) {
        let mut map = self.maps.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAPS_MAX && !map.contains_key(&key) {
            if let Some(k) = map.keys().next().cloned() {
                map.remove(&k);
            }
        }
        map.insert(key, p);
    }
}

pub(crate) fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum()
}

fn normalise(v: &mut [f64]) -> f64 {
    let n = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
    n
}

/// The top two principal axes of the rows (each of length `dims`) and the
/// share of the variance each explains. Deterministic: starts from a fixed vector.
pub(crate) fn pca2(rows: &[Vec<f32>], dims: usize) -> (Vec<f32>, [Vec<f32>; 2], [f64; 2]) {
    let n = rows.len().max(1) as f64;
    let mut mean = vec![0f64; dims];
    for r in rows {
        for (m, x) in mean.iter_mut().zip(r) {
            *m += f64::from(*x) / n;
        }
    }
    let centred: Vec<Vec<f64>> = rows
        .iter()
        .map(|r| {
            r.iter()
                .zip(&mean)
                .map(|(x, m)| f64::from(*x) - m)
                .collect()
        })
        .collect();
    let total: f64 = centred
        .iter()
        .map(|r| r.iter().map(|x| x * x).sum::<f64>())
        .sum();
    let mut axes: Vec<Vec<f64>> = Vec::new();
    let mut explained = [0.0; 2];
    for (c, share) in explained.iter_mut().enumerate() {
        let mut v: Vec<f64> = (0..dims)
            .map(|i| 1.0 + ((i * 7 + c * 13) % 11) as f64 / 11.0)
            .collect();
        normalise(&mut v);
        let mut eigen = 0.0;
        for _ in 0..100 {
            // w = Xᵀ (X v), minus the axes already found.
            let mut w = vec![0f64; dims];
            for r in &centred {
                let p: f64 = r.iter().zip(&v).map(|(a, b)| a * b).sum();
                for (wi, ri) in w.iter_mut().zip(r) {
                    *wi += p * ri;
                }
            }
            for a in &axes {
                let p: f64 = w.iter().zip(a).map(|(x, y)| x * y).sum();
                w.iter_mut().zip(a).for_each(|(x, y)| *x -= p * y);
            }
            let norm = normalise(&mut w);
            if norm == 0.0 {
                break;
            }
            let delta: f64 = w.iter().zip(&v).map(|(a, b)| (a - b).abs()).sum();
            v = w;
            eigen = norm;
            if delta < 1e-9 {
                break;
            }
        }
        *share = if total > 0.0 { eigen / total } else { 0.0 };
        axes.push(v);
    }
    let to32 = |v: &Vec<f64>| v.iter().map(|x| *x as f32).collect::<Vec<f32>>();
    (
        mean.iter().map(|x| *x as f32).collect(),
        [to32(&axes[0]), to32(&axes[1])],
        explained,
    )
}

pub(crate) fn project(p: &Projection, v: &[f32]) -> (f32, f32) {
    let centred: Vec<f32> = v.iter().zip(&p.mean).map(|(x, m)| x - m).collect();
    (
        dot(&centred, &p.axes[0]) as f32,
        dot(&centred, &p.axes[1]) as f32,
    )
}

pub(crate) fn unit(v: &[f32]) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        v.iter().map(|x| x / n).collect()
    } else {
        v.to_vec()
    }
}

/// One passage on the map.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MapPoint {
    /// The passage.
    pub id: PassageId,
    /// `chunk`, `faq` or `fact`.
    pub kind: String,
    /// Title.
    pub title: String,
    /// Colour group: the document's source, or `FAQ`.
    pub group: String,
    /// Language of the passage's text: `zh`, `en`, `mixed` or `other`.
    pub language: String,
    /// First coordinate on the map.
    pub x: f32,
    /// Second coordinate on the map.
    pub y: f32,
}

#[cfg(test)]
mod tests {
    use super::pca2;

    #[test]
    fn pca_finds_the_axes_of_largest_variance_in_order() {
        // Points spread 10 along e0, 3 along e2, 0.1 along e1.
        let mut rows = Vec::new();
        for i in -5i32..=5 {
            for j in -2i32..=2 {
                let (a, b) = (i as f32 * 2.0, j as f32 * 1.5);
                rows.push(vec![a, 0.1 * ((i + j) % 2) as f32, b, 0.0]);
            }
        }
        let (mean, axes, explained) = pca2(&rows, 4);
        assert!(mean.iter().all(|m| m.abs() < 0.1), "{mean:?}");
        assert!(axes[0][0].abs() > 0.99, "first axis is e0: {:?}", axes[0]);
        assert!(axes[1][2].abs() > 0.99, "second axis is e2: {:?}", axes[1]);
        let d: f32 = axes[0].iter().zip(&axes[1]).map(|(a, b)| a * b).sum();
        assert!(d.abs() < 1e-4, "orthogonal axes");
        assert!(
            explained[0] > explained[1] && explained[0] + explained[1] <= 1.0 + 1e-9,
            "{explained:?}"
        );
    }
}
