//! Terminal rendering of pipeline events and ingest outcomes.

use rag_core::{PassageView, PipelineEvent};
use rag_engine::{IngestOutcome, IngestStatus};
use std::fmt::Write;

fn snippet(text: &str, max_chars: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max_chars {
        flat
    } else {
        let cut: String = flat.chars().take(max_chars).collect();
        format!("{cut}…")
    }
}

fn title_of(views: &[PassageView], id: &rag_core::PassageId) -> String {
    views
        .iter()
        .find(|v| v.id == *id)
        .map(|v| snippet(&v.title, 40))
        .unwrap_or_else(|| id.to_string())
}

/// One event as terminal lines.
pub fn event(e: &PipelineEvent) -> String {
    let mut s = String::new();
    match e {
        PipelineEvent::QueryReceived {
            kb, query, paths, ..
        } => {
            let paths: Vec<&str> = paths.iter().map(|p| p.as_str()).collect();
            let _ = writeln!(
                s,
                "▶ query «{}» on {kb} · paths: {}",
                snippet(query, 80),
                paths.join(", ")
            );
        }
        PipelineEvent::QueryAnalyzed {
            language,
            tokens,
            suggested_lexical_interpolation,
            suggestion_reason,
            elapsed_ms,
            ..
        } => {
            let toks: Vec<&str> = tokens.iter().map(|t| t.text.as_str()).collect();
            let _ = writeln!(
                s,
                "● analysed ({language:?}, {elapsed_ms:.1} ms): {}",
                toks.join(" | ")
            );
            let _ = writeln!(
                s,
                "  suggested λ = {suggested_lexical_interpolation:.1}: {suggestion_reason}"
            );
        }
        PipelineEvent::Recall {
            list,
            passages,
            elapsed_ms,
        } => {
            let _ = writeln!(
                s,
                "● recall {} ({elapsed_ms:.1} ms): {} hits",
                list.path,
                list.hits.len()
            );
            for note in &list.notes {
                let _ = writeln!(s, "  · {note}");
            }
            for h in list.hits.iter().take(5) {
                let _ = writeln!(
                    s,
                    "  {:>2}. {:<8.3} {}  [{}]",
                    h.rank,
                    h.score,
                    title_of(passages, &h.id),
                    h.matched.join(", ")
                );
            }
        }
        PipelineEvent::RecallFailed { path, message } => {
            let _ = writeln!(s, "✗ recall {path} failed: {message}");
        }
        PipelineEvent::Fused {
            hits,
            dropped,
            k,
            rule,
            elapsed_ms,
            ..
        } => {
            let how = match rule {
                Some(rag_core::FusionRule::Convex) => "convex".to_owned(),
                _ => format!("RRF k={k}"),
            };
            let _ = writeln!(
                s,
                "● fused ({how}, {elapsed_ms:.2} ms): {} kept, {} dropped",
                hits.len(),
                dropped.len()
            );
            for h in hits.iter().take(5) {
                let parts: Vec<String> = h
                    .contributions
                    .iter()
                    .map(|c| format!("{}#{}", c.path, c.rank))
                    .collect();
                let _ = writeln!(
                    s,
                    "  {:>2}. {:.3} (normalised {:.2})  {}",
                    h.rank,
                    h.score,
                    h.normalized,
                    parts.join(" + ")
                );
            }
        }
        PipelineEvent::Reranked {
            reranker,
            hits,
            skipped,
            moves,
            elapsed_ms,
        } => {
            let _ = writeln!(
                s,
                "● reranked by {reranker} ({elapsed_ms:.2} ms): {} hits",
                hits.len()
            );
            if let Some(why) = skipped {
                let _ = writeln!(s, "  ! {why}");
            }
            for m in moves.iter().filter(|m| m.from != m.to).take(5) {
                let _ = writeln!(s, "  moved {} → {}", m.from, m.to);
            }
        }
        PipelineEvent::Routed {
            intent,
            score,
            threshold,
            example,
            answered,
            error,
            webhook_ms,
            ..
        } => {
            let outcome = match (answered, error) {
                (true, _) => "answered by its webhook".to_owned(),
                (false, e) => format!("webhook failed: {}", e.as_deref().unwrap_or("?")),
            };
            let _ = writeln!(
                s,
                "● routed to intent {intent} (score {score:.3} ≥ {threshold}, like «{}»; {webhook_ms:.1} ms): {outcome}",
                snippet(example, 40)
            );
        }
        PipelineEvent::ContextAssembled {
            sources,
            profile,
            dropped,
            elapsed_ms,
        } => {
            let _ = writeln!(
                s,
                "● context ({profile}, {elapsed_ms:.2} ms): {} sources, {} left out",
                sources.len(),
                dropped.len()
            );
            for src in sources {
                let _ = writeln!(s, "  [{}] {}", src.n, snippet(&src.passage.title, 60));
                let _ = writeln!(s, "      {}", snippet(&src.passage.body, 120));
            }
        }
        PipelineEvent::AnswerToken { text } => s.push_str(text),
        PipelineEvent::Answered {
            generator,
            model,
            kb_miss,
            removed_citations,
            cited,
            support,
            elapsed_ms,
            ..
        } => {
            let model = model
                .as_deref()
                .map(|m| format!(", {m}"))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "\n● answered by {generator}{model} ({elapsed_ms:.1} ms){}",
                if *kb_miss {
                    " — kb_miss: not in the knowledge base"
                } else {
                    ""
                }
            );
            for c in cited {
                let _ = writeln!(
                    s,
                    "  [{}] {}{}",
                    c.n,
                    snippet(&c.title, 70),
                    c.source
                        .as_deref()
                        .map(|u| format!("  ({u})"))
                        .unwrap_or_default()
                );
            }
            if !removed_citations.is_empty() {
                let _ = writeln!(
                    s,
                    "  ! removed citations outside the sources: {removed_citations:?}"
                );
            }
            for sc in support.iter().filter(|c| c.verdict == "unsupported") {
                let _ = writeln!(s, "  ? {}: «{}»", sc.verdict, snippet(&sc.text, 80));
            }
        }
        PipelineEvent::Done {
            timings,
            total_ms,
            warnings,
            ..
        } => {
            let parts: Vec<String> = timings
                .iter()
                .map(|t| format!("{} {:.1}", t.stage, t.ms))
                .collect();
            let _ = writeln!(s, "✓ done in {total_ms:.1} ms ({})", parts.join(", "));
            for w in warnings {
                let _ = writeln!(s, "  ! {w}");
            }
        }
        PipelineEvent::Error { code, message } => {
            let _ = writeln!(s, "✗ error [{code}]: {message}");
        }
    }
    s
}

/// One ingest outcome as a line.
pub fn ingest_line(o: &IngestOutcome) -> String {
    match &o.status {
        IngestStatus::Document { chunks, replaced } => {
            format!(
                "  ok      {} ({chunks} chunks{})",
                o.source,
                if *replaced {
                    ", replaced the older version"
                } else {
                    ""
                }
            )
        }
        IngestStatus::Faqs { added, duplicates } => format!(
            "  ok      {} ({added} FAQ entries, {duplicates} duplicates)",
            o.source
        ),
        IngestStatus::Skipped { reason } => format!("  skipped {}: {reason}", o.source),
        IngestStatus::Failed { reason, .. } => format!("  FAILED  {}: {reason}", o.source),
    }
}
