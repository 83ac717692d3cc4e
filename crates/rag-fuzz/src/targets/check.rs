//! Invariants shared by several targets.

use rag_core::{FaqId, Hit, PassageId, RankedList, RetrievalParams};
use rag_ingest::{BlockKind, Content, ExtractedDoc, Extraction, FaqRow, IngestError};

use super::Sig;

/// What [`rag_ingest::extract`] promises for any input: an error, or a
/// document whose blocks are in order, trimmed, separated by `"\n\n"` and
/// cover the text, whose PDF page ranges lie in the text; or FAQ rows with
/// non-empty trimmed questions and answers and their hash. Adds the result's
/// shape to `sig`.
pub fn extraction(r: &Result<Extraction, IngestError>, sig: &mut Sig) {
    match r {
        Err(e) => {
            sig.add(e.code()).message(&e.to_string());
        }
        Ok(x) => {
            ensure!(
                x.content_hash.len() == 64,
                "content hash {:?}",
                x.content_hash
            );
            sig.add(x.format.as_str());
            match &x.content {
                Content::Document(d) => {
                    ensure!(
                        d.format == x.format,
                        "format {:?} != {:?}",
                        d.format,
                        x.format
                    );
                    document(d, sig);
                }
                Content::Faqs { rows, .. } => faq_rows(rows, sig),
            }
        }
    }
}

/// The invariants of an [`ExtractedDoc`].
pub fn document(d: &ExtractedDoc, sig: &mut Sig) {
    let text = &d.text;
    ensure!(!d.blocks.is_empty(), "a document without blocks");
    let mut prev_end = None;
    let mut kinds = 0u32;
    for (i, b) in d.blocks.iter().enumerate() {
        ensure!(
            b.start < b.end && b.end <= text.len(),
            "block {i} {}..{} of a {}-byte text",
            b.start,
            b.end,
            text.len()
        );
        ensure!(
            text.is_char_boundary(b.start) && text.is_char_boundary(b.end),
            "block {i} {}..{} splits a character",
            b.start,
            b.end
        );
        let s = &text[b.start..b.end];
        ensure!(s.trim() == s, "block {i} is not trimmed: {:?}", clip(s));
        match prev_end {
            None => ensure!(b.start == 0, "first block starts at {}", b.start),
            Some(e) => ensure!(
                text.get(e..b.start) == Some("\n\n"),
                "blocks {} and {i} are not separated by a blank line",
                i - 1
            ),
        }
        if let BlockKind::Heading { level } = b.kind {
            ensure!((1..=9).contains(&level), "heading level {level}");
        }
        kinds |= 1 << kind_index(b.kind);
        prev_end = Some(b.end);
    }
    ensure!(
        prev_end == Some(text.len()),
        "the last block ends at {prev_end:?}, the text at {}",
        text.len()
    );
    let mut last = 0;
    for (i, p) in d.pages.iter().enumerate() {
        ensure!(
            p.start <= p.end && p.end <= text.len() && p.start >= last,
            "page {i} {p:?} of a {}-byte text (previous page ended at {last})",
            text.len()
        );
        ensure!(
            text.is_char_boundary(p.start) && text.is_char_boundary(p.end),
            "page {i} {p:?} splits a character"
        );
        last = p.end;
    }
    if let Some(t) = &d.title {
        sig.add(t.is_empty());
    }
    sig.add(kinds)
        .magnitude(d.blocks.len())
        .magnitude(d.pages.len())
        .add(d.encoding.as_ref().map(|e| e.name().to_owned()));
}

fn kind_index(k: BlockKind) -> u32 {
    match k {
        BlockKind::Heading { level } => 4 + u32::from(level.min(9)),
        BlockKind::Paragraph => 0,
        BlockKind::ListItem => 1,
        BlockKind::Code => 2,
        BlockKind::TableRow => 3,
    }
}

/// The invariants of FAQ rows.
pub fn faq_rows(rows: &[FaqRow], sig: &mut Sig) {
    ensure!(!rows.is_empty(), "FAQ content without rows");
    let mut prev = 0;
    for r in rows {
        ensure!(
            !r.question.is_empty() && r.question.trim() == r.question,
            "question {:?} (line {})",
            clip(&r.question),
            r.line
        );
        ensure!(
            !r.answer.is_empty() && r.answer.trim() == r.answer,
            "answer {:?} (line {})",
            clip(&r.answer),
            r.line
        );
        ensure!(
            r.tags.iter().all(|t| !t.is_empty() && t.trim() == t),
            "tags {:?} (line {})",
            r.tags,
            r.line
        );
        ensure!(
            r.hash == rag_ingest::sha256_hex(r.embedding_text().as_bytes()),
            "the hash of line {} is not that of its embedding text",
            r.line
        );
        ensure!(r.line >= prev, "line {} after line {prev}", r.line);
        prev = r.line;
        sig.add(r.status as u8)
            .add(r.tags.len().min(4))
            .add(r.valid_from.is_some())
            .add(r.valid_until.is_some())
            .add(r.source_url.is_some());
    }
    sig.magnitude(rows.len());
}

fn passage(n: u128) -> PassageId {
    let id = format!("00000000-0000-7000-8000-{n:012x}");
    PassageId::Faq(FaqId::parse(&id).unwrap_or_else(|| panic!("bad test id {id}")))
}

/// What validated retrieval parameters promise: every effective weight and
/// every fused score is finite (issue 15, finding 3: a fused score that
/// overflowed to infinity broke the query log for good), normalised scores
/// lie in [0, 1], and fusion keeps at most `top_k` hits.
pub fn validated_params(p: &RetrievalParams) {
    let mut paths = p.paths.clone();
    paths.sort();
    paths.dedup();
    // Fusion asks for the weights of the paths that returned candidates.
    for &path in &paths {
        let w = p.fusion.effective_weight(path, &paths);
        ensure!(
            w.is_finite() && w >= 0.0,
            "effective weight {w} of {path} from validated parameters"
        );
    }
    // Every path ranks the same passages, in rotated orders.
    let lists: Vec<RankedList> = paths
        .iter()
        .enumerate()
        .map(|(i, path)| RankedList {
            path: *path,
            hits: (0..4u32)
                .map(|r| Hit {
                    id: passage(u128::from((r + i as u32) % 5)),
                    rank: r + 1,
                    score: f64::from(4 - r),
                    matched: vec![],
                })
                .collect(),
            notes: vec![],
        })
        .collect();
    let fused = rag_fusion::fuse(&lists, &p.fusion);
    ensure!(
        fused.max_score.is_finite() && fused.max_score >= 0.0,
        "max fused score {} from validated parameters",
        fused.max_score
    );
    ensure!(
        fused.hits.len() <= p.fusion.top_k,
        "{} hits kept with top_k {}",
        fused.hits.len(),
        p.fusion.top_k
    );
    for h in &fused.hits {
        ensure!(
            h.score.is_finite() && h.normalized.is_finite(),
            "fused score {} (normalised {}) from validated parameters",
            h.score,
            h.normalized
        );
        ensure!(
            (0.0..=1.0 + 1e-9).contains(&h.normalized),
            "normalised score {} outside [0, 1]",
            h.normalized
        );
        ensure!(
            h.contributions
                .iter()
                .all(|c| c.rrf.is_finite() && c.weight.is_finite()),
            "a contribution is not finite"
        );
    }
    for d in &fused.dropped {
        ensure!(d.score.is_finite(), "dropped score {}", d.score);
    }
}

/// At most 80 characters of `s`, for messages.
pub fn clip(s: &str) -> String {
    s.chars().take(80).collect()
}
