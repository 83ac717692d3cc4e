//! A neighbour-preserving 2-D layout of unit vectors, after UMAP (McInnes,
//! Healy and Melville, 2018): each point's k nearest neighbours by cosine
//! distance make a fuzzy graph (a point's distances rescaled by its own
//! nearest distance and a bandwidth chosen so the memberships sum to
//! log2 k; the two directions of an edge joined as a fuzzy union), and a
//! layout started from the PCA coordinates is moved by stochastic gradient
//! descent: edges pull their ends together by their weight, random points
//! push apart. Deterministic: a fixed seed, one thread.
//!
//! Neighbours come from rag-ann: exact search up to [`EXACT_UP_TO`] points,
//! an HNSW graph above. Compute-only; the caller runs it off the runtime.

use rag_ann::{FlatIndex, HnswIndex, HnswParams, Query, VectorSearcher};
use std::collections::HashMap;

/// Neighbours per point in the fuzzy graph (umap-learn's default).
pub(crate) const NEIGHBOURS: usize = 15;
/// Points up to which neighbours are found by exact search.
const EXACT_UP_TO: usize = 4_000;
/// The curve 1 / (1 + a d^2b) for a minimum distance of 0.1 and a spread
/// of 1 (umap-learn's defaults, fitted once).
const A: f32 = 1.577;
const B: f32 = 0.8951;
/// Random points pushed away per pull.
const NEGATIVES: usize = 5;
/// Largest step of one coordinate in one update.
const CLIP: f32 = 4.0;
/// Half the width of the starting layout.
const INIT_SCALE: f32 = 10.0;

/// The layout of `rows` (unit vectors), starting from `init` (one point per
/// row, such as PCA coordinates). Fewer than three rows keep `init`.
pub(crate) fn layout(rows: &[Vec<f32>], init: &[(f32, f32)]) -> Vec<(f32, f32)> {
    let n = rows.len();
    assert_eq!(n, init.len());
    if n < 3 {
        return init.to_vec();
    }
    let k = NEIGHBOURS.min(n - 1);
    let knn = neighbours(rows, k);
    let edges = fuzzy_graph(&knn, k);
    let mut y = start(init);
    let epochs = if n <= 10_000 { 500 } else { 200 };
    optimise(&mut y, &edges, epochs);
    y.chunks_exact(2).map(|p| (p[0], p[1])).collect()
}

/// Each row's `k` nearest other rows with their cosine distances, nearest
/// first.
fn neighbours(rows: &[Vec<f32>], k: usize) -> Vec<Vec<(u32, f32)>> {
    // Rows of one length, unit and finite: the index accepts them. Should it
    // not, every point keeps no neighbours and the layout stays the start.
    nearest(rows, k).unwrap_or_else(|_| vec![Vec::new(); rows.len()])
}

fn nearest(rows: &[Vec<f32>], k: usize) -> rag_ann::Result<Vec<Vec<(u32, f32)>>> {
    let mut flat = FlatIndex::with_capacity(rows[0].len(), rows.len())?;
    for (i, r) in rows.iter().enumerate() {
        flat.add(i as u32, r)?;
    }
    let search = |index: &dyn VectorSearcher<u32>| {
        rows.iter()
            .enumerate()
            .map(|(i, r)| {
                let hits = index.search(&Query::new(r, k + 1))?.hits;
                Ok(hits
                    .into_iter()
                    .filter(|h| h.key as usize != i)
                    .take(k)
                    .map(|h| (h.key, (1.0 - h.score).max(0.0)))
                    .collect())
            })
            .collect()
    };
    if rows.len() <= EXACT_UP_TO {
        search(&flat)
    } else {
        search(&HnswIndex::build(flat, HnswParams::default())?)
    }
}

/// The fuzzy union of each point's membership graph: (from, to, weight),
/// both directions of every edge.
fn fuzzy_graph(knn: &[Vec<(u32, f32)>], k: usize) -> Vec<(u32, u32, f32)> {
    let target = (k as f32).log2();
    let mut directed: HashMap<(u32, u32), f32> = HashMap::new();
    for (i, list) in knn.iter().enumerate() {
        let rho = list.iter().map(|h| h.1).find(|d| *d > 0.0).unwrap_or(0.0);
        let sigma = bandwidth(list, rho, target);
        for &(j, d) in list {
            let w = (-((d - rho).max(0.0)) / sigma).exp();
            directed.insert((i as u32, j), w);
        }
    }
    let mut edges = Vec::with_capacity(directed.len() * 2);
    for (&(i, j), &w) in &directed {
        let back = directed.get(&(j, i)).copied().unwrap_or(0.0);
        if back > 0.0 && j < i {
            continue; // The pair was joined from its other end.
        }
        let joined = w + back - w * back;
        edges.push((i, j, joined));
        edges.push((j, i, joined));
    }
    // The map's iteration order must not decide the layout.
    edges.sort_by_key(|e| (e.0, e.1));
    edges
}

/// The σ for which a point's memberships sum to `target`, by bisection.
fn bandwidth(list: &[(u32, f32)], rho: f32, target: f32) -> f32 {
    let (mut lo, mut hi, mut mid) = (0.0f32, f32::INFINITY, 1.0f32);
    for _ in 0..64 {
        let sum: f32 = list
            .iter()
            .map(|h| (-((h.1 - rho).max(0.0)) / mid).exp())
            .sum();
        if (sum - target).abs() < 1e-5 {
            break;
        }
        if sum > target {
            hi = mid;
            mid = (lo + hi) / 2.0;
        } else {
            lo = mid;
            mid = if hi.is_finite() {
                (lo + hi) / 2.0
            } else {
                mid * 2.0
            };
        }
    }
    let mean = list.iter().map(|h| h.1).sum::<f32>() / list.len().max(1) as f32;
    mid.max(1e-3 * mean).max(1e-12)
}

/// The starting layout: `init` scaled to ±[`INIT_SCALE`], with a little
/// deterministic jitter so that equal points can move apart.
fn start(init: &[(f32, f32)]) -> Vec<f32> {
    let span = init
        .iter()
        .flat_map(|p| [p.0.abs(), p.1.abs()])
        .filter(|v| v.is_finite())
        .fold(0.0f32, f32::max);
    let scale = if span > 0.0 { INIT_SCALE / span } else { 1.0 };
    let mut rng = Rng(0x5EED_2026_1206);
    init.iter()
        .flat_map(|p| [p.0, p.1])
        .map(|v| if v.is_finite() { v * scale } else { 0.0 })
        .map(|v| v + (rng.unit() - 0.5) * 1e-3 * INIT_SCALE)
        .collect()
}

fn clip(v: f32) -> f32 {
    v.clamp(-CLIP, CLIP)
}

/// Stochastic gradient descent over the edges: each edge is sampled in
/// proportion to its weight; each sample pulls its ends together and pushes
/// its first end away from [`NEGATIVES`] random points; the step shrinks
/// linearly to zero.
fn optimise(y: &mut [f32], edges: &[(u32, u32, f32)], epochs: usize) {
    let n = y.len() / 2;
    let max_w = edges.iter().map(|e| e.2).fold(0.0f32, f32::max);
    if max_w <= 0.0 {
        return;
    }
    // Edges too weak to be sampled once in all the epochs are left out.
    let kept: Vec<(usize, usize, f32)> = edges
        .iter()
        .filter(|e| e.2 >= max_w / epochs as f32)
        .map(|e| (e.0 as usize, e.1 as usize, max_w / e.2))
        .collect();
    let mut next = kept.iter().map(|e| e.2).collect::<Vec<f32>>();
    let per_negative: Vec<f32> = kept.iter().map(|e| e.2 / NEGATIVES as f32).collect();
    let mut next_negative = per_negative.clone();
    let mut rng = Rng(0x0A11_CE5E_ED00_0001);
    for epoch in 0..epochs {
        let alpha = 1.0 - epoch as f32 / epochs as f32;
        let now = epoch as f32;
        for (e, &(i, j, every)) in kept.iter().enumerate() {
            if next[e] > now {
                continue;
            }
            let (dx, dy) = (y[2 * i] - y[2 * j], y[2 * i + 1] - y[2 * j + 1]);
            let d2 = dx * dx + dy * dy;
            if d2 > 0.0 {
                let coef = -2.0 * A * B * d2.powf(B - 1.0) / (A * d2.powf(B) + 1.0);
                let (gx, gy) = (clip(coef * dx) * alpha, clip(coef * dy) * alpha);
                y[2 * i] += gx;
                y[2 * i + 1] += gy;
                y[2 * j] -= gx;
                y[2 * j + 1] -= gy;
            }
            next[e] += every;
            let negatives = ((now - next_negative[e]) / per_negative[e]).max(0.0) as usize;
            for _ in 0..negatives {
                let o = (rng.next() % n as u64) as usize;
                if o == i {
                    continue;
                }
                let (dx, dy) = (y[2 * i] - y[2 * o], y[2 * i + 1] - y[2 * o + 1]);
                let d2 = dx * dx + dy * dy;
                let (gx, gy) = if d2 > 0.0 {
                    let coef = 2.0 * B / ((0.001 + d2) * (A * d2.powf(B) + 1.0));
                    (clip(coef * dx), clip(coef * dy))
                } else {
                    (CLIP, CLIP)
                };
                y[2 * i] += gx * alpha;
                y[2 * i + 1] += gy * alpha;
            }
            next_negative[e] += negatives as f32 * per_negative[e];
        }
    }
}

/// splitmix64: a small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// In [0, 1).
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `clusters` groups of `per` unit vectors in `dims` dimensions, each
    /// around its own axis, so no two directions explain most of the spread.
    fn clustered(clusters: usize, per: usize, dims: usize) -> (Vec<Vec<f32>>, Vec<usize>) {
        let mut rng = Rng(7);
        let mut rows = Vec::new();
        let mut label = Vec::new();
        for c in 0..clusters {
            for _ in 0..per {
                let mut v: Vec<f32> = (0..dims).map(|_| (rng.unit() - 0.5) * 0.6).collect();
                v[c] += 1.0;
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                rows.push(v.into_iter().map(|x| x / n).collect());
                label.push(c);
            }
        }
        (rows, label)
    }

    fn pca(rows: &[Vec<f32>]) -> Vec<(f32, f32)> {
        let (mean, axes, _) = super::super::pca::pca2(rows, rows[0].len());
        rows.iter()
            .map(|r| {
                let c: Vec<f32> = r.iter().zip(&mean).map(|(x, m)| x - m).collect();
                let d = |a: &Vec<f32>| c.iter().zip(a).map(|(x, y)| x * y).sum::<f32>();
                (d(&axes[0]), d(&axes[1]))
            })
            .collect()
    }

    /// Share of each point's 10 nearest points on the map that are of its
    /// own cluster.
    fn purity(map: &[(f32, f32)], label: &[usize]) -> f64 {
        let mut same = 0;
        for (i, p) in map.iter().enumerate() {
            let mut d: Vec<(f32, usize)> = map
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(j, q)| ((p.0 - q.0).powi(2) + (p.1 - q.1).powi(2), j))
                .collect();
            d.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            same += d
                .iter()
                .take(10)
                .filter(|(_, j)| label[*j] == label[i])
                .count();
        }
        same as f64 / (10 * map.len()) as f64
    }

    #[test]
    fn clusters_that_pca_overlaps_stay_apart() {
        let (rows, label) = clustered(8, 40, 32);
        let init = pca(&rows);
        let map = layout(&rows, &init);
        assert!(map.iter().all(|p| p.0.is_finite() && p.1.is_finite()));
        let (by_pca, by_umap) = (purity(&init, &label), purity(&map, &label));
        assert!(by_umap > 0.95, "UMAP neighbourhoods: {by_umap}");
        assert!(by_pca < 0.8, "the fixture must defeat PCA: {by_pca}");
    }

    #[test]
    fn the_layout_is_deterministic_and_small_inputs_keep_their_start() {
        let (rows, _) = clustered(3, 20, 16);
        let init = pca(&rows);
        assert_eq!(layout(&rows, &init), layout(&rows, &init));
        assert_eq!(layout(&rows[..2], &init[..2]), init[..2].to_vec());
        assert!(layout(&[], &[]).is_empty());
    }

    #[test]
    fn equal_vectors_move_apart_without_nan() {
        let v = {
            let mut v = vec![0.0f32; 8];
            v[0] = 1.0;
            v
        };
        let rows = vec![v; 30];
        let init = vec![(0.0, 0.0); 30];
        let map = layout(&rows, &init);
        assert!(map.iter().all(|p| p.0.is_finite() && p.1.is_finite()));
    }

    #[test]
    fn each_bandwidth_makes_memberships_sum_to_log2_k() {
        let list: Vec<(u32, f32)> = (0..15).map(|j| (j, 0.1 + 0.02 * j as f32)).collect();
        let sigma = bandwidth(&list, 0.1, 15f32.log2());
        let sum: f32 = list
            .iter()
            .map(|h| (-((h.1 - 0.1).max(0.0)) / sigma).exp())
            .sum();
        assert!((sum - 15f32.log2()).abs() < 1e-3, "{sum}");
    }

    #[test]
    fn the_fuzzy_union_is_symmetric() {
        let knn = vec![
            vec![(1, 0.1), (2, 0.3)],
            vec![(0, 0.1), (2, 0.2)],
            vec![(1, 0.2), (0, 0.3)],
        ];
        let edges = fuzzy_graph(&knn, 2);
        let w: HashMap<(u32, u32), f32> = edges.iter().map(|e| ((e.0, e.1), e.2)).collect();
        assert_eq!(w.len(), edges.len(), "one weight per directed pair");
        for ((i, j), x) in &w {
            assert_eq!(w.get(&(*j, *i)), Some(x));
            assert!(*x > 0.0 && *x <= 1.0);
        }
    }
}
