//! The retrieval flags shared by `query`, `eval` and `bench`: parsed once,
//! applied to a knowledge base's settings ([`RetrievalFlags::apply`]) or
//! turned into the engine's overrides ([`RetrievalFlags::overrides`]).

use crate::UserFacing;
use clap::Args;
use rag_core::{PathKind, RetrievalParams};

#[derive(Debug, Args, Clone)]
pub struct RetrievalFlags {
    /// Paths to run, comma-separated (bm25,substring,fuzzy,synonym,fact,dense).
    #[arg(long, value_delimiter = ',')]
    pub paths: Option<Vec<String>>,
    /// Candidates per path.
    #[arg(long)]
    pub per_path_k: Option<usize>,
    /// Hits kept after fusion.
    #[arg(long)]
    pub top_k: Option<usize>,
    /// Hits kept after rerank.
    #[arg(long)]
    pub rerank_top_k: Option<usize>,
    /// RRF k.
    #[arg(long)]
    pub rrf_k: Option<f64>,
    /// Fusion rule: convex (normalised scores) or rrf (ranks only).
    #[arg(long, value_parser = ["convex", "rrf"])]
    pub fusion: Option<String>,
    /// λ in [0,1]: 0 = vector only, 1 = lexical only.
    #[arg(long)]
    pub lexical_interpolation: Option<f64>,
    /// Per-path weights, e.g. bm25=1,substring=0.3.
    #[arg(long, value_delimiter = ',')]
    pub weights: Option<Vec<String>>,
    /// BM25 k1.
    #[arg(long)]
    pub k1: Option<f32>,
    /// BM25 b.
    #[arg(long)]
    pub b: Option<f32>,
    /// Weight of the Chinese character-bigram field (0 = off).
    #[arg(long)]
    pub ngram_weight: Option<f32>,
    /// BM25 fields: "flat" or "multi:TITLE,BODY,TAGS" weights.
    #[arg(long)]
    pub fields: Option<String>,
    /// Typo path: the trigram similarity a correction's candidates need.
    #[arg(long)]
    pub fuzzy_threshold: Option<f32>,
    /// Minimum normalised fused score.
    #[arg(long)]
    pub min_score: Option<f64>,
}

impl RetrievalFlags {
    /// Applies the flags to `base`.
    pub fn apply(&self, mut p: RetrievalParams) -> anyhow::Result<RetrievalParams> {
        let bad = |m: String| -> anyhow::Error { UserFacing(m).into() };
        if let Some(paths) = &self.paths {
            p.paths = paths
                .iter()
                .map(|s| {
                    PathKind::parse(s.trim()).ok_or_else(|| bad(format!("unknown path {s:?}")))
                })
                .collect::<anyhow::Result<_>>()?;
        }
        if let Some(k) = self.per_path_k {
            p.per_path_k = k;
        }
        if let Some(k) = self.top_k {
            p.fusion.top_k = k;
        }
        if let Some(k) = self.rerank_top_k {
            p.rerank_top_k = k;
        }
        if let Some(k) = self.rrf_k {
            p.fusion.k = k;
        }
        if let Some(l) = self.lexical_interpolation {
            p.fusion.lexical_interpolation = Some(l);
        }
        if let Some(rule) = self.rule() {
            p.fusion.rule = rule;
        }
        if let Some(ws) = &self.weights {
            for w in ws {
                let (name, value) = w
                    .split_once('=')
                    .ok_or_else(|| bad(format!("weight {w:?} is not path=number")))?;
                let path = PathKind::parse(name.trim())
                    .ok_or_else(|| bad(format!("unknown path {name:?}")))?;
                let value: f64 = value
                    .trim()
                    .parse()
                    .map_err(|_| bad(format!("weight {w:?} is not a number")))?;
                p.fusion.weights.set(path, value);
            }
        }
        if let Some(k1) = self.k1 {
            p.bm25.k1 = k1;
        }
        if let Some(b) = self.b {
            p.bm25.b = b;
        }
        if let Some(w) = self.ngram_weight {
            p.bm25.ngram_weight = w;
        }
        if let Some(f) = &self.fields {
            p.bm25.fields = parse_fields(f)
                .ok_or_else(|| bad(format!("--fields {f:?}: expected flat or multi:T,B,G")))?;
        }
        if let Some(t) = self.fuzzy_threshold {
            p.fuzzy_threshold = t;
        }
        if let Some(m) = self.min_score {
            p.fusion.min_score = m;
        }
        p.validate().map_err(|e| bad(e.to_string()))?;
        Ok(p)
    }
}

impl RetrievalFlags {
    fn rule(&self) -> Option<rag_core::FusionRule> {
        self.fusion.as_deref().map(|f| match f {
            "rrf" => rag_core::FusionRule::Rrf,
            _ => rag_core::FusionRule::Convex,
        })
    }

    /// The flags as overrides of `base` (the knowledge base's settings): only
    /// the knobs a flag names are set; a partial flag (`--k1`, one weight)
    /// sets its whole group from `base` with that one value changed.
    pub fn overrides(
        &self,
        base: &RetrievalParams,
    ) -> anyhow::Result<rag_core::RetrievalOverrides> {
        let p = self.apply(base.clone())?;
        let bm25_given = self.k1.is_some()
            || self.b.is_some()
            || self.ngram_weight.is_some()
            || self.fields.is_some();
        Ok(rag_core::RetrievalOverrides {
            paths: self.paths.as_ref().map(|_| p.paths.clone()),
            per_path_k: self.per_path_k,
            top_k: self.top_k,
            rerank_top_k: self.rerank_top_k,
            k: self.rrf_k,
            fusion_rule: self.rule(),
            weights: self.weights.as_ref().map(|_| p.fusion.weights),
            lexical_interpolation: self.lexical_interpolation,
            auto_interpolation: None,
            min_score: self.min_score,
            rerank: None,
            bm25: bm25_given.then_some(p.bm25),
            fuzzy_threshold: self.fuzzy_threshold,
        })
    }
}

fn parse_fields(s: &str) -> Option<rag_core::FieldMode> {
    if s == "flat" {
        return Some(rag_core::FieldMode::Flat);
    }
    let w: Vec<f32> = s
        .strip_prefix("multi:")?
        .split(',')
        .map(|x| x.trim().parse().ok())
        .collect::<Option<_>>()?;
    match w[..] {
        [title, body, tags] => Some(rag_core::FieldMode::MultiField { title, body, tags }),
        _ => None,
    }
}
