//! What the `fused` event says about the fusion rule that ran.

use rag_core::{FusionRule, Origin};

/// Why `rule` ran and what it reads, for the `fused` event.
pub(crate) fn rule_reason(rule: FusionRule, origin: Origin) -> String {
    let what = match rule {
        FusionRule::Convex => format!(
            "convex combination of the paths' scores, each normalised between its best candidate (1) and its candidate at rank {} (0): a path whose best candidates are far ahead of the rest weighs more for this question than one whose scores are close",
            rag_fusion::convex::DEPTH
        ),
        FusionRule::Rrf => {
            "weighted reciprocal rank fusion: Σ weight / (k + rank), ranks only".to_owned()
        }
    };
    let from = match origin {
        Origin::Request => "set by the request",
        _ if rule == FusionRule::default() => "the default rule",
        _ => "set in the knowledge base's settings",
    };
    format!("{what} ({from})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_names_the_rule_and_its_origin() {
        let r = rule_reason(FusionRule::Rrf, Origin::Request);
        assert!(r.contains("reciprocal rank") && r.ends_with("(set by the request)"));
        let c = rule_reason(FusionRule::default(), Origin::Base);
        assert!(c.ends_with("(the default rule)"), "{c}");
    }
}
