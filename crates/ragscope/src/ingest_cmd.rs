//! `ragscope ingest`: files and directories through the engine's ingest job,
//! one line per file on stdout, a progress line on stderr when it is a
//! terminal, and a summary table at the end (failures grouped by code).

use crate::cli::{collect_files, IngestArgs};
use crate::{core_err, render, App, UserFacing};
use rag_engine::{
    IngestFile, IngestOptions, IngestOutcome, IngestProgress, IngestStatus, IngestSummary,
};
use rag_store::OpenMode;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::path::Path;
use std::time::Instant;

pub async fn run(app: &App, args: IngestArgs) -> anyhow::Result<()> {
    let engine = app.engine(OpenMode::ReadWrite)?;
    engine.kb(&app.tenant, &args.kb).await.map_err(core_err)?;
    let files = collect_files(&args.paths)?;
    let options = IngestOptions::new(engine.config().chunk);
    let limits = engine.ingest_limits();
    let mut bar = ProgressLine::new(files.len(), !args.json && std::io::stderr().is_terminal());
    let mut summary = IngestSummary::default();
    let started = Instant::now();
    // Files go to the engine in batches: their extractions share workers,
    // their passages are embedded as one list, and each batch is one write.
    let mut done = 0usize;
    for group in batches(&files) {
        let mut outcomes: Vec<Option<IngestOutcome>> = vec![None; group.len()];
        let mut codes: HashMap<String, String> = HashMap::new();
        let mut inputs = Vec::new();
        let mut slots = Vec::new();
        for (k, file) in group.iter().enumerate() {
            let source = file.display().to_string();
            match read_checked(file, &limits) {
                Ok(bytes) => {
                    inputs.push(IngestFile { source, bytes });
                    slots.push(k);
                }
                Err((size, c, reason)) => {
                    // Refused before the engine saw it: the same events a job reports.
                    summary.record(&IngestProgress::Received {
                        source: source.clone(),
                        bytes: size,
                    });
                    summary.record(&IngestProgress::failed(&source, c, &reason));
                    codes.insert(source.clone(), c.to_owned());
                    outcomes[k] = Some(IngestOutcome {
                        source,
                        status: IngestStatus::Failed {
                            code: c.to_owned(),
                            reason,
                        },
                    });
                }
            }
        }
        bar.start_batch(done, group.len(), &group[0].display().to_string());
        let mut on_event = |e: IngestProgress| {
            if let IngestProgress::Failed {
                source, code: c, ..
            } = &e
            {
                codes.insert(source.clone(), c.clone());
            }
            summary.record(&e);
            bar.event(&e, &summary);
        };
        let results = engine
            .ingest_batch(&app.tenant, &args.kb, inputs, &options, &mut on_event)
            .await
            .map_err(core_err)?;
        for (k, outcome) in slots.into_iter().zip(results) {
            outcomes[k] = Some(outcome);
        }
        bar.clear();
        for outcome in outcomes.into_iter().flatten() {
            let code = codes.get(&outcome.source).map(String::as_str);
            if args.json {
                let mut value = serde_json::to_value(&outcome)?;
                if let (Some(c), Some(obj)) = (code, value.as_object_mut()) {
                    obj.insert("code".into(), c.into());
                }
                println!("{value}");
            } else {
                println!("{}", file_line(&outcome, code));
            }
        }
        done += group.len();
    }
    bar.clear();
    if !args.json {
        print!(
            "{}",
            summary_table(&summary, started.elapsed().as_secs_f64())
        );
    }
    let failed = summary.failed_count();
    if failed > 0 {
        return Err(UserFacing(format!("{failed} of {} files failed", files.len())).into());
    }
    Ok(())
}

/// At most this many files go to the engine at once...
const BATCH_FILES: usize = 256;
/// ...and at most this many bytes (files over it go alone).
const BATCH_BYTES: u64 = 16 << 20;

/// The files in consecutive batches, by count and by size on disk.
fn batches(files: &[std::path::PathBuf]) -> Vec<&[std::path::PathBuf]> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for (i, f) in files.iter().enumerate() {
        let len = std::fs::metadata(f).map_or(0, |m| m.len());
        if i > start && (i - start >= BATCH_FILES || bytes + len > BATCH_BYTES) {
            out.push(&files[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += len;
    }
    if start < files.len() {
        out.push(&files[start..]);
    }
    out
}

/// Reads a file after checking its size, so an oversized file is refused
/// without being read. Errors: (size, code, reason).
fn read_checked(
    path: &Path,
    limits: &rag_engine::rag_ingest::Limits,
) -> Result<Vec<u8>, (u64, &'static str, String)> {
    let meta = std::fs::metadata(path).map_err(|e| (0, "read_error", e.to_string()))?;
    rag_engine::rag_ingest::check_size(meta.len(), limits)
        .map_err(|e| (meta.len(), e.code(), e.to_string()))?;
    std::fs::read(path).map_err(|e| (meta.len(), "read_error", e.to_string()))
}

/// One file's result, as printed on stdout.
fn file_line(o: &IngestOutcome, code: Option<&str>) -> String {
    match (&o.status, code) {
        (IngestStatus::Failed { reason, .. }, Some(code)) => {
            format!("  FAILED  {} [{code}]: {reason}", o.source)
        }
        _ => render::ingest_line(o),
    }
}

/// The end-of-run summary: one line of totals, then a table.
fn summary_table(s: &IngestSummary, seconds: f64) -> String {
    let failed = s.failed_count();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} files: {} chunks, {} FAQ entries added, {} skipped, {} failed ({:.1} s)",
        s.files, s.chunks, s.faqs_added, s.skipped, failed, seconds
    );
    let mut rows: Vec<(&str, String)> = vec![
        ("files", s.files.to_string()),
        (
            "documents",
            if s.replaced > 0 {
                format!("{} ({} replaced an older version)", s.documents, s.replaced)
            } else {
                s.documents.to_string()
            },
        ),
        ("chunks", s.chunks.to_string()),
        (
            "FAQ entries",
            format!(
                "{} added, {} already present",
                s.faqs_added, s.faq_duplicates
            ),
        ),
    ];
    if s.drafts_added > 0 || !s.drafts_failed.is_empty() {
        rows.push((
            "FAQ drafts",
            format!(
                "{} drafted by the LLM, {} documents not drafted",
                s.drafts_added,
                s.drafts_failed.len()
            ),
        ));
    }
    if s.vectors_cached + s.vectors_computed > 0 {
        rows.push((
            "vectors",
            format!(
                "{} computed, {} from the cache",
                s.vectors_computed, s.vectors_cached
            ),
        ));
    }
    rows.push((
        "skipped",
        format!("{} (same content already stored)", s.skipped),
    ));
    rows.push(("failed", failed.to_string()));
    if seconds > 0.0 && s.files > 1 {
        rows.push((
            "rate",
            format!(
                "{:.1} files/s, {:.1} chunks/s",
                s.files as f64 / seconds,
                s.chunks as f64 / seconds
            ),
        ));
    }
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in rows {
        let _ = writeln!(out, "  {k:<width$}  {v}");
    }
    for f in &s.drafts_failed {
        let _ = writeln!(out, "    not drafted: {}: {}", f.source, f.reason);
    }
    for (code, files) in &s.failed {
        let _ = writeln!(out, "    {code} ({})", files.len());
        for f in files {
            let _ = writeln!(out, "      {}: {}", f.source, f.reason);
        }
    }
    out
}

/// A one-line progress display on stderr, redrawn in place, with the rate
/// and the time left; silent when stderr is not a terminal (logs, pipes,
/// tests).
struct ProgressLine {
    total: usize,
    enabled: bool,
    /// Files finished (their last event seen).
    finished: usize,
    name: String,
    started: Instant,
}

impl ProgressLine {
    fn new(total: usize, enabled: bool) -> Self {
        ProgressLine {
            total,
            enabled,
            finished: 0,
            name: String::new(),
            started: Instant::now(),
        }
    }

    /// A batch of `len` files starts after `done` files, with `first`.
    fn start_batch(&mut self, done: usize, len: usize, first: &str) {
        self.finished = done;
        // Keep the end of long paths: the file name matters most.
        let chars: Vec<char> = first.chars().collect();
        let name = if chars.len() > 40 {
            format!("…{}", chars[chars.len() - 39..].iter().collect::<String>())
        } else {
            first.to_owned()
        };
        self.name = if len > 1 {
            format!("{name} (+{} more)", len - 1)
        } else {
            name
        };
        self.draw("reading", None);
    }

    fn event(&mut self, e: &IngestProgress, summary: &IngestSummary) {
        let next = match e {
            IngestProgress::Received { .. } => "extracting",
            IngestProgress::Extracted { .. } => "chunking",
            IngestProgress::Chunked { .. } => "embedding",
            IngestProgress::Embedded { .. } => "indexing",
            IngestProgress::Indexed { .. }
            | IngestProgress::Skipped { .. }
            | IngestProgress::Failed { .. } => {
                self.finished += 1;
                "indexing"
            }
            _ => return,
        };
        self.draw(next, Some(summary.chunks));
    }

    fn draw(&self, stage: &str, chunks: Option<usize>) {
        if !self.enabled {
            return;
        }
        const WIDTH: usize = 24;
        let filled = (self.finished.min(self.total) * WIDTH)
            .checked_div(self.total)
            .unwrap_or(WIDTH);
        let bar: String = "█".repeat(filled) + &"░".repeat(WIDTH - filled);
        let digits = self.total.to_string().len();
        let elapsed = self.started.elapsed().as_secs_f64();
        let mut line = format!(
            "[{:>digits$}/{}] {bar} {elapsed:>5.1}s",
            self.finished, self.total,
        );
        if let Some(eta) = eta(self.finished, self.total, elapsed) {
            let _ = write!(
                line,
                " {:.0} files/s, {eta:.0}s left",
                self.finished as f64 / elapsed
            );
        }
        let _ = write!(line, " {stage:<10} {}", self.name);
        if let Some(c) = chunks.filter(|c| *c > 0) {
            let _ = write!(line, "  ({c} chunks so far)");
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{line}");
        let _ = err.flush();
    }

    fn clear(&self) {
        if self.enabled {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}

/// Seconds left at the rate so far, once there is a rate to go by.
fn eta(finished: usize, total: usize, elapsed: f64) -> Option<f64> {
    (finished > 0 && elapsed > 0.5)
        .then(|| total.saturating_sub(finished) as f64 * elapsed / finished as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_cut_by_count_and_size_and_eta_follows_the_rate() {
        let dir = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        for i in 0..600 {
            let p = dir.path().join(format!("{i}.md"));
            std::fs::write(&p, "x").unwrap();
            files.push(p);
        }
        let big = dir.path().join("big.md");
        std::fs::write(&big, vec![b'x'; (BATCH_BYTES + 1) as usize]).unwrap();
        files.insert(10, big);
        let b = batches(&files);
        assert_eq!(
            b.iter().map(|g| g.len()).collect::<Vec<_>>(),
            vec![10, 1, 256, 256, 78]
        );
        assert!(batches(&[]).is_empty());
        assert_eq!(eta(0, 10, 5.0), None);
        assert_eq!(eta(5, 10, 0.1), None);
        assert_eq!(eta(5, 10, 5.0), Some(5.0));
    }

    #[test]
    fn summary_groups_failures_by_code() {
        let mut s = IngestSummary::default();
        for (src, code) in [
            ("a.pdf", "no_text_layer"),
            ("b.exe", "unsupported_format"),
            ("c.pdf", "no_text_layer"),
        ] {
            s.record(&IngestProgress::Received {
                source: src.into(),
                bytes: 1,
            });
            s.record(&IngestProgress::failed(src, code, format!("{src} is bad")));
        }
        s.record(&IngestProgress::Received {
            source: "d.md".into(),
            bytes: 1,
        });
        s.record(&IngestProgress::Indexed {
            source: "d.md".into(),
            seq: 1,
            chunks: 3,
            faqs_added: 0,
            faq_duplicates: 0,
            replaced: false,
        });
        let table = summary_table(&s, 2.0);
        assert!(
            table.starts_with("4 files: 3 chunks, 0 FAQ entries added, 0 skipped, 3 failed"),
            "{table}"
        );
        assert!(table.contains("  documents    1\n"), "{table}");
        assert!(
            table.contains(
                "    no_text_layer (2)\n      a.pdf: a.pdf is bad\n      c.pdf: c.pdf is bad\n"
            ),
            "{table}"
        );
        assert!(table.contains("    unsupported_format (1)\n"), "{table}");
    }
}
