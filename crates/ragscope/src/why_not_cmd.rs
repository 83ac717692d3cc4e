//! `ragscope query … --why-not ID`: where an expected entry fell in every
//! recall path, in fusion and in rerank (`Engine::why_not`), printed for a
//! person or as one JSON object.

use rag_engine::WhyNot;
use std::fmt::Write as _;

/// The explanation as text: one line per path, then fusion and rerank.
pub fn render(w: &WhyNot, query: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "why not {} ({}) for «{query}»:", w.id, w.title);
    for v in &w.paths {
        let _ = write!(out, "  {:<10} {:<15}", v.path.as_str(), v.status);
        if let (Some(rank), Some(score)) = (v.rank, v.score) {
            let _ = write!(out, " rank {rank} (score {score:.4})");
        }
        let _ = writeln!(out, "  {}", v.reason);
    }
    match (w.fused_rank, &w.fusion_dropped) {
        (Some(rank), _) => {
            let rule = w.fusion_rule.map_or("fusion", |r| r.as_str());
            let _ = write!(out, "  fused ({rule}): rank {rank}");
            if let Some(s) = w.fused_score {
                let _ = write!(out, ", score {s:.4}");
            }
            let parts: Vec<String> = w
                .contributions
                .iter()
                .map(|c| {
                    format!(
                        "{} #{} ×{} → {:.4}",
                        c.path.as_str(),
                        c.rank,
                        c.weight,
                        c.rrf
                    )
                })
                .collect();
            if !parts.is_empty() {
                let _ = write!(out, " = {}", parts.join(" + "));
            }
            out.push('\n');
        }
        (None, Some(why)) => {
            let _ = writeln!(out, "  fusion dropped it: {why}");
        }
        (None, None) => {
            let _ = writeln!(out, "  not a fusion candidate: no path returned it");
        }
    }
    if let Some(rank) = w.reranked_rank {
        let _ = writeln!(out, "  after rerank: rank {rank}");
    } else if w.rerank_dropped {
        let _ = writeln!(out, "  rerank dropped it");
    }
    if let Some(n) = w.context_source {
        let _ = writeln!(out, "  in the context as source [{n}]");
    } else if let Some(why) = &w.context_dropped {
        let _ = writeln!(out, "  left out of the context: {why}");
    }
    out
}
