//! The substring path: the normalised query and its key terms as substrings.

use crate::bm25::{idf, top_k};
use crate::filter::Filter;
use crate::index::{LexicalIndex, Ref};
use aho_corasick::AhoCorasick;
use rag_core::{AnalyzedQuery, Hit, PathKind, RankedList};
use rag_text::normalize_for_match;

/// Share of the query's key terms (weighted) a passage must contain.
pub const MIN_COVERAGE: f32 = 0.6;

/// The patterns of the substring path and how they are scored; shared by the
/// in-memory index and stores that find candidates themselves.
#[derive(Debug, Clone)]
pub struct SubstringPlan {
    /// The patterns: the whole normalised query first (when it has at least
    /// two characters), then the key terms; at most 64.
    pub patterns: Vec<String>,
    /// Whether `patterns[0]` is the whole query.
    pub whole_first: bool,
    matcher: AhoCorasick,
}

/// What one passage's text says about the patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubstringMatch {
    /// Bit `i` is set when pattern `i` occurs.
    pub bits: u64,
    /// Occurrences of all patterns, overlapping ones included.
    pub count: u32,
}

impl SubstringPlan {
    /// The plan of a query, or the note saying why there is none.
    pub fn new(q: &AnalyzedQuery) -> Result<Self, String> {
        let whole = normalize_for_match(&q.raw);
        let mut patterns: Vec<String> = Vec::new();
        if whole.chars().count() >= 2 {
            patterns.push(whole.clone());
        }
        for t in &q.key_terms {
            let t = normalize_for_match(t);
            if !t.is_empty() && !patterns.contains(&t) {
                patterns.push(t);
            }
        }
        if patterns.is_empty() {
            return Err("no pattern to look for".into());
        }
        patterns.truncate(64);
        let matcher =
            AhoCorasick::new(&patterns).map_err(|_| "patterns could not be compiled".to_owned())?;
        let whole_first = patterns.first().is_some_and(|p| *p == whole);
        Ok(SubstringPlan {
            patterns,
            whole_first,
            matcher,
        })
    }

    /// The note every list of this path carries.
    pub fn note(&self) -> String {
        format!("patterns: {}", self.patterns.join(" | "))
    }

    /// Index of the first key-term pattern.
    fn key_start(&self) -> usize {
        usize::from(self.whole_first)
    }

    /// Pattern weights from how many of `n` text passages contain each
    /// (rarer and longer weigh more; the whole query counts double).
    pub fn weights(&self, dfs: &[usize], n: usize) -> Vec<f64> {
        self.patterns
            .iter()
            .zip(dfs)
            .enumerate()
            .map(|(i, (p, df))| {
                let len_factor = (p.chars().count() as f64).min(8.0).sqrt();
                let whole_bonus = if i == 0 && self.whole_first { 2.0 } else { 1.0 };
                idf(n as f32, *df as f32) as f64 * len_factor * whole_bonus
            })
            .collect()
    }

    /// The patterns in `text`.
    pub fn find(&self, text: &str) -> SubstringMatch {
        let (mut bits, mut count) = (0u64, 0u32);
        for m in self.matcher.find_overlapping_iter(text) {
            bits |= 1 << m.pattern().as_usize();
            count += 1;
        }
        SubstringMatch { bits, count }
    }

    /// The score of a passage whose text has `chars` characters, or `None`
    /// when it contains neither the whole query nor enough of the key terms.
    pub fn score(&self, weights: &[f64], m: SubstringMatch, chars: usize) -> Option<f64> {
        if m.bits == 0 {
            return None;
        }
        let has = |p: usize| m.bits & (1 << p) != 0;
        let key_total: f64 = weights[self.key_start()..].iter().sum();
        let whole_found = self.whole_first && has(0);
        let covered: f64 = (self.key_start()..self.patterns.len())
            .filter(|p| has(*p))
            .map(|p| weights[p])
            .sum();
        let coverage = if key_total > 0.0 {
            covered / key_total
        } else {
            0.0
        };
        if !whole_found && coverage < f64::from(MIN_COVERAGE) {
            return None;
        }
        let density = m.count as f64 / chars.max(1) as f64;
        Some(coverage + if whole_found { 1.0 } else { 0.0 } + 0.1 * density.min(1.0))
    }

    /// The patterns a match found, in pattern order.
    pub fn matched(&self, bits: u64) -> Vec<String> {
        (0..self.patterns.len())
            .filter(|p| bits & (1 << p) != 0)
            .map(|p| self.patterns[p].clone())
            .collect()
    }
}

impl LexicalIndex {
    /// Passages containing the whole query, or most of its key terms, as
    /// substrings of their normalised text. Key terms weigh by rarity (idf over
    /// this path's own matches) and length; a passage must cover at least
    /// 60% of that weight. Score: coverage, plus 1 when the whole query occurs,
    /// plus a small share for how densely the terms occur.
    pub fn substring(&self, q: &AnalyzedQuery, k: usize, filter: &Filter) -> RankedList {
        let plan = match SubstringPlan::new(q) {
            Ok(p) => p,
            Err(note) => {
                return RankedList {
                    path: PathKind::Substring,
                    hits: vec![],
                    notes: vec![note],
                }
            }
        };
        let patterns = &plan.patterns;
        let n = self.text_count as usize;
        // Candidates per segment and pattern (live passages only; `None`:
        // the pattern cannot be looked up, every passage is a candidate).
        let candidates: Vec<Vec<Option<Vec<u32>>>> = self
            .segments
            .iter()
            .zip(&self.dead)
            .map(|(seg, dead)| {
                patterns
                    .iter()
                    .map(|p| {
                        seg.ngrams.candidates(p).map(|mut c| {
                            c.retain(|o| !dead.contains(*o));
                            c
                        })
                    })
                    .collect()
            })
            .collect();
        let dfs: Vec<usize> = (0..patterns.len())
            .map(|p| {
                if candidates.iter().any(|seg| seg[p].is_none()) {
                    n
                } else {
                    candidates
                        .iter()
                        .map(|seg| seg[p].as_ref().map_or(0, Vec::len))
                        .sum()
                }
            })
            .collect();
        let weights = plan.weights(&dfs, n);
        let key_start = plan.key_start();
        let key_total: f64 = weights[key_start..].iter().sum();
        let min_coverage = f64::from(MIN_COVERAGE);

        let mut scored: Vec<((Ref, u64), f64)> = Vec::new();
        for (si, seg) in self.segments.iter().enumerate() {
            let dead = &self.dead[si];
            let cands = &candidates[si];
            let len = seg.len();
            let mut bound = vec![0f64; len];
            let mut everywhere = 0f64;
            for p in key_start..patterns.len() {
                match &cands[p] {
                    Some(list) => list.iter().for_each(|o| bound[*o as usize] += weights[p]),
                    None => everywhere += weights[p],
                }
            }
            let mut verify: Vec<u32> = (0..len as u32)
                .filter(|o| {
                    key_total > 0.0
                        && (bound[*o as usize] + everywhere) / key_total >= min_coverage - 1e-12
                })
                .collect();
            if plan.whole_first {
                match &cands[0] {
                    Some(list) => verify.extend(list),
                    None => verify = (0..len as u32).collect(),
                }
                verify.sort_unstable();
                verify.dedup();
            }
            for ord in verify {
                let o = ord as usize;
                if dead.contains(ord) || !filter.allows(&seg.passages[o]) {
                    continue;
                }
                let text = seg.match_text.get(o);
                let m = plan.find(text);
                if let Some(score) = plan.score(&weights, m, text.chars().count()) {
                    scored.push((
                        (
                            Ref {
                                seg: si as u32,
                                ord,
                            },
                            m.bits,
                        ),
                        score,
                    ));
                }
            }
        }
        top_k(&mut scored, k, |(r, _)| self.meta_at(*r).id);
        let hits = scored
            .into_iter()
            .enumerate()
            .map(|(i, ((r, bits), score))| Hit {
                id: self.meta_at(r).id,
                rank: i as u32 + 1,
                score,
                matched: plan.matched(bits),
            })
            .collect();
        RankedList {
            path: PathKind::Substring,
            hits,
            notes: vec![plan.note()],
        }
    }
}
