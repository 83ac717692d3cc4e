//! The HNSW graph itself (Malkov and Yashunin, "Efficient and robust
//! approximate nearest neighbor search using Hierarchical Navigable Small
//! World graphs"), over int8 codes.
//!
//! Nodes are the row ordinals of the vector store. Layer 0 keeps up to
//! `2m` links per node in one flat `u32` array (`m0` slots per node, unused
//! slots hold [`NONE`]); the few nodes on higher layers keep `m` slots per
//! layer in their own small array. Similarities are integer dot products of
//! codes ([`Codes::sim`]); ties are broken by the lower ordinal, so a graph
//! built from the same rows in the same order is the same graph, and its
//! bytes ([`Graph::encode`]) are too.
//!
//! A bulk insert ([`Graph::insert_all`]) runs on several threads as in
//! hnswlib: links are atomics, a node's list is rewritten under one of a
//! fixed set of striped locks, and the entry point under its own; a reader
//! may see a list mid-rewrite, which only changes which nodes a walk meets.
//! A graph built on one thread is the same for the same rows; one built on
//! several depends on the threads' interleaving (its recall does not).
//!
//! The walk may be given an `accept` predicate (tombstones, the caller's
//! filter): rejected nodes still lead the walk but never enter the result,
//! and a budget of similarity evaluations bounds the work a selective filter
//! can cause; the caller falls back to an exact scan when the walk comes back
//! short.

use crate::error::{AnnError, Result};
use crate::quant::Codes;
use crate::synthetic::SplitMix64;
use std::cell::RefCell;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

/// An empty link slot, and "no entry point".
pub(crate) const NONE: u32 = u32::MAX;

/// The highest layer a node may be given.
const MAX_LEVEL: usize = 15;

/// Locks guarding link-list rewrites, shared by node id modulo this count.
const STRIPES: usize = 1024;

/// Nodes inserted on one thread before a bulk insert fans out, so the
/// threads start from a graph that already navigates.
const SEQUENTIAL_SEED: usize = 1024;

/// A node with its similarity to the query; better is a higher similarity,
/// then a lower ordinal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Scored {
    pub sim: i32,
    pub id: u32,
}

impl Ord for Scored {
    fn cmp(&self, other: &Self) -> Ordering {
        self.sim
            .cmp(&other.sim)
            .then_with(|| other.id.cmp(&self.id))
    }
}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Visit marks reused across walks on one thread: a node is visited in this
/// walk when its mark equals the current epoch.
struct Visited {
    marks: Vec<u32>,
    epoch: u32,
}

impl Visited {
    fn start(&mut self, nodes: usize) {
        if self.marks.len() < nodes {
            self.marks.resize(nodes, 0);
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.marks.iter_mut().for_each(|m| *m = 0);
            self.epoch = 1;
        }
    }

    /// Marks `id`; false when it was already marked in this walk.
    #[inline]
    fn first(&mut self, id: u32) -> bool {
        let m = &mut self.marks[id as usize];
        if *m == self.epoch {
            false
        } else {
            *m = self.epoch;
            true
        }
    }
}

thread_local! {
    static VISITED: RefCell<Visited> = const { RefCell::new(Visited { marks: Vec::new(), epoch: 0 }) };
}

/// A navigable small-world graph over the rows of a [`Codes`].
pub(crate) struct Graph {
    m: usize,
    m0: usize,
    ef_construction: usize,
    /// The top layer of each node.
    levels: Vec<u8>,
    /// Layer-0 links, `m0` slots per node.
    links0: Vec<AtomicU32>,
    /// Links of layers 1..=level, `m` slots each, for nodes above layer 0.
    upper: Vec<Box<[AtomicU32]>>,
    /// The entry point and the top layer.
    head: Mutex<(u32, u8)>,
    locks: Box<[Mutex<()>]>,
    rng: u64,
}

fn atomics(values: impl IntoIterator<Item = u32>) -> Vec<AtomicU32> {
    values.into_iter().map(AtomicU32::new).collect()
}

fn loaded(slots: &[AtomicU32]) -> impl Iterator<Item = u32> + '_ {
    slots.iter().map(|a| a.load(Relaxed))
}

fn stripes() -> Box<[Mutex<()>]> {
    (0..STRIPES).map(|_| Mutex::new(())).collect()
}

impl Clone for Graph {
    fn clone(&self) -> Self {
        Graph {
            m: self.m,
            m0: self.m0,
            ef_construction: self.ef_construction,
            levels: self.levels.clone(),
            links0: atomics(loaded(&self.links0)),
            upper: self
                .upper
                .iter()
                .map(|u| atomics(loaded(u)).into_boxed_slice())
                .collect(),
            head: Mutex::new(self.head()),
            locks: stripes(),
            rng: self.rng,
        }
    }
}

impl PartialEq for Graph {
    fn eq(&self, other: &Self) -> bool {
        (
            self.m,
            self.ef_construction,
            &self.levels,
            self.head(),
            self.rng,
        ) == (
            other.m,
            other.ef_construction,
            &other.levels,
            other.head(),
            other.rng,
        ) && loaded(&self.links0).eq(loaded(&other.links0))
            && self
                .upper
                .iter()
                .zip(&other.upper)
                .all(|(a, b)| loaded(a).eq(loaded(b)))
    }
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("m", &self.m)
            .field("nodes", &self.nodes())
            .field("head", &self.head())
            .finish_non_exhaustive()
    }
}

/// The similarity of the query to a node.
pub(crate) trait Probe {
    fn sim(&self, id: u32) -> i32;
}

struct RowProbe<'c> {
    codes: &'c Codes,
    q: &'c [i8],
}

impl Probe for RowProbe<'_> {
    #[inline]
    fn sim(&self, id: u32) -> i32 {
        crate::quant::dot_i8(self.q, self.codes.row(id))
    }
}

impl Graph {
    /// An empty graph.
    pub fn new(m: usize, ef_construction: usize, seed: u64) -> Self {
        Graph {
            m,
            m0: 2 * m,
            ef_construction,
            levels: Vec::new(),
            links0: Vec::new(),
            upper: Vec::new(),
            head: Mutex::new((NONE, 0)),
            locks: stripes(),
            rng: seed,
        }
    }

    /// Nodes in the graph (the rows it has seen, live or not).
    pub fn nodes(&self) -> usize {
        self.levels.len()
    }

    /// Links per node on the upper layers (a graph read from bytes keeps
    /// the `m` it was built with, whatever the parameters are now).
    pub fn m(&self) -> usize {
        self.m
    }

    /// Bytes held for links.
    pub fn link_bytes(&self) -> usize {
        self.links0.len() * 4 + self.upper.iter().map(|u| u.len() * 4 + 16).sum::<usize>()
    }

    fn head(&self) -> (u32, u8) {
        *self.head.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock(&self, id: u32) -> std::sync::MutexGuard<'_, ()> {
        self.locks[id as usize % STRIPES]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn links(&self, id: u32, level: usize) -> &[AtomicU32] {
        if level == 0 {
            &self.links0[id as usize * self.m0..][..self.m0]
        } else {
            &self.upper[id as usize][(level - 1) * self.m..][..self.m]
        }
    }

    fn random_level(&mut self) -> usize {
        let mut rng = SplitMix64::new(self.rng);
        self.rng = rng.next_u64();
        let u = rng.next_f64().max(f64::MIN_POSITIVE);
        let ml = 1.0 / (self.m as f64).ln();
        ((-u.ln() * ml) as usize).min(MAX_LEVEL)
    }

    /// Room for `count` more nodes, with their levels drawn in order.
    fn grow(&mut self, count: usize) -> Vec<usize> {
        let levels: Vec<usize> = (0..count).map(|_| self.random_level()).collect();
        self.levels.extend(levels.iter().map(|&l| l as u8));
        self.links0
            .extend((0..count * self.m0).map(|_| AtomicU32::new(NONE)));
        for &l in &levels {
            self.upper
                .push(atomics(std::iter::repeat_n(NONE, l * self.m)).into_boxed_slice());
        }
        levels
    }

    /// Inserts row `id` of `codes`, which must be the next node (`nodes()`).
    #[cfg(test)]
    pub fn insert(&mut self, codes: &Codes, id: u32) {
        debug_assert_eq!(id as usize, self.nodes());
        let level = self.grow(1)[0];
        self.insert_grown(codes, id, level);
    }

    /// Inserts rows `first..first + count` of `codes` (the next nodes) on up
    /// to `threads` threads.
    pub fn insert_all(&mut self, codes: &Codes, first: u32, count: usize, threads: usize) {
        debug_assert_eq!(first as usize, self.nodes());
        let levels = self.grow(count);
        let seeded = SEQUENTIAL_SEED.saturating_sub(first as usize).min(count);
        let threads = if count - seeded < SEQUENTIAL_SEED {
            1
        } else {
            threads.max(1)
        };
        let graph = &*self;
        for (i, &level) in levels.iter().enumerate().take(seeded) {
            graph.insert_grown(codes, first + i as u32, level);
        }
        let next = AtomicUsize::new(seeded);
        let work = || loop {
            let i = next.fetch_add(1, Relaxed);
            if i >= count {
                break;
            }
            graph.insert_grown(codes, first + i as u32, levels[i]);
        };
        if threads == 1 {
            work();
        } else {
            std::thread::scope(|scope| {
                for _ in 1..threads {
                    scope.spawn(work);
                }
                work();
            });
        }
    }

    /// Links node `id` (already given its slots) into the graph.
    fn insert_grown(&self, codes: &Codes, id: u32, level: usize) {
        let (entry, top) = {
            let mut head = self.head.lock().unwrap_or_else(|p| p.into_inner());
            if head.0 == NONE {
                *head = (id, level as u8);
                return;
            }
            *head
        };
        let top = top as usize;
        let probe = RowProbe {
            codes,
            q: codes.row(id),
        };
        let nodes = self.nodes();
        VISITED.with(|v| {
            let visited = &mut v.borrow_mut();
            let mut ep = Scored {
                sim: probe.sim(entry),
                id: entry,
            };
            for lc in (level + 1..=top).rev() {
                ep = self.greedy(&probe, ep, lc);
            }
            for lc in (0..=level.min(top)).rev() {
                visited.start(nodes);
                let (found, _) = self.walk(
                    &probe,
                    &[ep],
                    self.ef_construction,
                    lc,
                    None,
                    usize::MAX,
                    visited,
                );
                // A new node links to `m` neighbours on every layer; layer 0
                // leaves room for `2m` so that later nodes can link back.
                let chosen = select(codes, &found, self.m);
                {
                    let _guard = self.lock(id);
                    let slots = self.links(id, lc);
                    for (i, s) in slots.iter().enumerate() {
                        s.store(chosen.get(i).copied().unwrap_or(NONE), Relaxed);
                    }
                }
                for &n in &chosen {
                    self.link(codes, n, id, lc);
                }
                if let Some(best) = found.first() {
                    ep = *best;
                }
            }
        });
        if level > top {
            let mut head = self.head.lock().unwrap_or_else(|p| p.into_inner());
            if level > head.1 as usize {
                *head = (id, level as u8);
            }
        }
    }

    /// Adds a link `from -> to` on `level`, pruning `from`'s list with the
    /// heuristic when it is full.
    fn link(&self, codes: &Codes, from: u32, to: u32, level: usize) {
        let _guard = self.lock(from);
        let slots = self.links(from, level);
        if let Some(free) = slots.iter().find(|s| s.load(Relaxed) == NONE) {
            free.store(to, Relaxed);
            return;
        }
        let cap = slots.len();
        let mut cands: Vec<Scored> = loaded(slots)
            .chain(std::iter::once(to))
            .map(|n| Scored {
                sim: codes.sim(from, n),
                id: n,
            })
            .collect();
        cands.sort_unstable_by(|a, b| b.cmp(a));
        let chosen = select(codes, &cands, cap);
        for (i, s) in slots.iter().enumerate() {
            s.store(chosen.get(i).copied().unwrap_or(NONE), Relaxed);
        }
    }

    /// Greedy descent on one layer: the best neighbour until none is better.
    fn greedy(&self, probe: &impl Probe, mut ep: Scored, level: usize) -> Scored {
        loop {
            let mut moved = false;
            for n in loaded(self.links(ep.id, level)) {
                if n == NONE {
                    break;
                }
                let s = Scored {
                    sim: probe.sim(n),
                    id: n,
                };
                if s > ep {
                    ep = s;
                    moved = true;
                }
            }
            if !moved {
                return ep;
            }
        }
    }

    /// The best-first walk of one layer: up to `ef` accepted nodes, best
    /// first, and whether the budget cut the walk short.
    #[allow(clippy::too_many_arguments)]
    fn walk(
        &self,
        probe: &impl Probe,
        entries: &[Scored],
        ef: usize,
        level: usize,
        accept: Option<&dyn Fn(u32) -> bool>,
        budget: usize,
        visited: &mut Visited,
    ) -> (Vec<Scored>, bool) {
        let ok = |id: u32| accept.is_none_or(|a| a(id));
        let mut cands: BinaryHeap<Scored> = BinaryHeap::new();
        let mut found: BinaryHeap<Reverse<Scored>> = BinaryHeap::new();
        for &e in entries {
            if visited.first(e.id) {
                cands.push(e);
                if ok(e.id) {
                    found.push(Reverse(e));
                }
            }
        }
        let mut spent = 0usize;
        let mut cut = false;
        while let Some(c) = cands.pop() {
            if found.len() >= ef && found.peek().is_some_and(|w| c < w.0) {
                break;
            }
            if spent >= budget {
                cut = true;
                break;
            }
            for n in loaded(self.links(c.id, level)) {
                if n == NONE {
                    break;
                }
                if !visited.first(n) {
                    continue;
                }
                spent += 1;
                let s = Scored {
                    sim: probe.sim(n),
                    id: n,
                };
                if found.len() < ef || found.peek().is_some_and(|w| s > w.0) {
                    cands.push(s);
                    if ok(n) {
                        found.push(Reverse(s));
                        if found.len() > ef {
                            found.pop();
                        }
                    }
                }
            }
        }
        let mut out: Vec<Scored> = found.into_iter().map(|r| r.0).collect();
        out.sort_unstable_by(|a, b| b.cmp(a));
        (out, cut)
    }

    /// Up to `ef` accepted nodes near the query code `q`, best first, with at
    /// most `budget` similarity evaluations on the bottom layer, and whether
    /// the budget ran out before the walk ended.
    pub fn search(
        &self,
        codes: &Codes,
        q: &[i8],
        ef: usize,
        accept: Option<&dyn Fn(u32) -> bool>,
        budget: usize,
    ) -> (Vec<Scored>, bool) {
        let (entry, top) = self.head();
        if entry == NONE {
            return (Vec::new(), false);
        }
        let probe = RowProbe { codes, q };
        let mut ep = Scored {
            sim: probe.sim(entry),
            id: entry,
        };
        for lc in (1..=top as usize).rev() {
            ep = self.greedy(&probe, ep, lc);
        }
        let nodes = self.nodes();
        VISITED.with(|v| {
            let visited = &mut v.borrow_mut();
            visited.start(nodes);
            self.walk(&probe, &[ep], ef, 0, accept, budget, visited)
        })
    }

    /// The graph as bytes (little-endian), appended to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let (entry, top) = self.head();
        for v in [
            self.m as u64,
            self.ef_construction as u64,
            self.nodes() as u64,
            u64::from(entry),
            u64::from(top),
            self.rng,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.levels);
        for l in loaded(&self.links0) {
            out.extend_from_slice(&l.to_le_bytes());
        }
        for u in &self.upper {
            for l in loaded(u) {
                out.extend_from_slice(&l.to_le_bytes());
            }
        }
    }

    /// Reads a graph written by [`encode`](Self::encode) from the front of
    /// `bytes`; returns it and the bytes it used. Every link is checked to
    /// name a node of the graph.
    pub fn decode(bytes: &[u8]) -> Result<(Self, usize)> {
        let bad = |why: &str| AnnError::Corrupt(format!("graph: {why}"));
        let mut at = 0usize;
        let mut take = |len: usize| -> Result<&[u8]> {
            let end = at.checked_add(len).ok_or_else(|| bad("length overflow"))?;
            let s = bytes.get(at..end).ok_or_else(|| bad("truncated"))?;
            at = end;
            Ok(s)
        };
        let mut word = || -> Result<u64> {
            Ok(u64::from_le_bytes(
                take(8)?.try_into().expect("eight bytes"),
            ))
        };
        let (m, ef, n, entry, top, rng) = (word()?, word()?, word()?, word()?, word()?, word()?);
        if !(2..=128).contains(&m) || ef < m || n > u64::from(u32::MAX) || top > MAX_LEVEL as u64 {
            return Err(bad("header out of range"));
        }
        let (m, n) = (m as usize, n as usize);
        let m0 = 2 * m;
        let levels = take(n)?.to_vec();
        if levels.iter().any(|&l| l as usize > MAX_LEVEL) {
            return Err(bad("level out of range"));
        }
        let read_links = |raw: &[u8]| -> Result<Vec<AtomicU32>> {
            raw.chunks_exact(4)
                .map(|c| {
                    let l = u32::from_le_bytes(c.try_into().expect("four bytes"));
                    if l == NONE || (l as usize) < n {
                        Ok(AtomicU32::new(l))
                    } else {
                        Err(bad("link to a missing node"))
                    }
                })
                .collect()
        };
        let links0 = read_links(take(n.checked_mul(m0 * 4).ok_or_else(|| bad("size"))?)?)?;
        let mut upper = Vec::with_capacity(n);
        for &l in &levels {
            upper.push(read_links(take(l as usize * m * 4)?)?.into_boxed_slice());
        }
        let entry = entry as u32;
        if (n == 0) != (entry == NONE) || (entry != NONE && entry as usize >= n) {
            return Err(bad("entry point"));
        }
        if entry != NONE && levels[entry as usize] as u64 != top {
            return Err(bad("entry point is not on the top layer"));
        }
        let graph = Graph {
            m,
            m0,
            ef_construction: ef as usize,
            levels,
            links0,
            upper,
            head: Mutex::new((entry, top as u8)),
            locks: stripes(),
            rng,
        };
        Ok((graph, at))
    }
}

/// The heuristic of the paper's algorithm 4: walking the candidates best
/// first, keep one only if it is closer to the base than to every kept one
/// (so links spread in all directions), then fill the rest of the `cap`
/// slots with the best of those skipped.
fn select(codes: &Codes, cands: &[Scored], cap: usize) -> Vec<u32> {
    let mut kept: Vec<u32> = Vec::with_capacity(cap);
    let mut skipped: Vec<u32> = Vec::new();
    for c in cands {
        if kept.len() >= cap {
            break;
        }
        if kept.iter().all(|&r| codes.sim(c.id, r) < c.sim) {
            kept.push(c.id);
        } else {
            skipped.push(c.id);
        }
    }
    for s in skipped {
        if kept.len() >= cap {
            break;
        }
        kept.push(s);
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel;
    use crate::synthetic::ClusteredVectors;

    fn codes(n: usize, dims: usize, seed: u64) -> Codes {
        let mut data = ClusteredVectors::new(dims, 8, 0.8, seed);
        let mut rows = Vec::new();
        for _ in 0..n {
            kernel::push_normalised(&mut rows, &data.sample(), dims).unwrap();
        }
        let mut c = Codes::fitted(dims, &rows);
        for r in rows.chunks_exact(dims) {
            c.push(r);
        }
        c
    }

    #[test]
    fn same_rows_same_graph_and_bytes_round_trip() {
        let c = codes(600, 24, 1);
        let build = || {
            let mut g = Graph::new(8, 32, 42);
            for i in 0..600 {
                g.insert(&c, i);
            }
            g
        };
        let (a, b) = (build(), build());
        assert_eq!(a, b);
        let mut bytes = Vec::new();
        a.encode(&mut bytes);
        let (back, used) = Graph::decode(&bytes).unwrap();
        assert_eq!(used, bytes.len());
        assert_eq!(back, a);
        // Every link names a node; no node links to itself.
        for id in 0..600u32 {
            assert!(loaded(a.links(id, 0)).all(|l| l == NONE || (l < 600 && l != id)));
        }
        // Damage is refused, not trusted.
        let mut broken = bytes.clone();
        let at = 48 + 600 + 4;
        broken[at..at + 4].copy_from_slice(&5_000u32.to_le_bytes());
        assert!(Graph::decode(&broken).is_err());
        assert!(Graph::decode(&bytes[..bytes.len() - 3]).is_err());
        assert!(Graph::decode(&[]).is_err());
    }

    #[test]
    fn walk_respects_accept_and_budget() {
        let c = codes(2_000, 16, 2);
        let mut g = Graph::new(8, 32, 7);
        for i in 0..2_000 {
            g.insert(&c, i);
        }
        let q = c.row(17).to_vec();
        let (all, _) = g.search(&c, &q, 20, None, usize::MAX);
        assert_eq!(all.len(), 20);
        assert_eq!(all[0].id, 17);
        let even = |id: u32| id.is_multiple_of(2);
        let (got, _) = g.search(&c, &q, 20, Some(&even), usize::MAX);
        assert_eq!(got.len(), 20);
        assert!(got.iter().all(|s| s.id.is_multiple_of(2)));
        // A budget of one evaluation cannot fill the list.
        let (few, cut) = g.search(&c, &q, 20, None, 1);
        assert!(few.len() < 20 && cut);
    }

    #[test]
    fn a_parallel_build_finds_what_a_sequential_one_finds() {
        let n = 6_000;
        let c = codes(n, 32, 3);
        let mut one = Graph::new(8, 48, 5);
        one.insert_all(&c, 0, n, 1);
        let mut two = Graph::new(8, 48, 5);
        two.insert_all(&c, 0, n, 2);
        assert_eq!(one.nodes(), n);
        assert_eq!(two.nodes(), n);
        // The levels are drawn before the threads start: the same on both.
        assert_eq!(one.levels, two.levels);
        let mut agree = 0;
        for probe in (0..n as u32).step_by(97) {
            let q = c.row(probe).to_vec();
            let a: Vec<u32> = one
                .search(&c, &q, 40, None, usize::MAX)
                .0
                .iter()
                .take(10)
                .map(|s| s.id)
                .collect();
            let b: Vec<u32> = two
                .search(&c, &q, 40, None, usize::MAX)
                .0
                .iter()
                .take(10)
                .map(|s| s.id)
                .collect();
            assert_eq!(b[0], probe, "a stored row finds itself");
            agree += a.iter().filter(|x| b.contains(x)).count();
        }
        let total = (n as u32).div_ceil(97) as usize * 10;
        assert!(agree * 100 >= total * 95, "{agree} of {total}");
        // Every link of the parallel graph names another node.
        for id in 0..n as u32 {
            assert!(loaded(two.links(id, 0)).all(|l| l == NONE || ((l as usize) < n && l != id)));
        }
    }
}
