//! `ragscope faq`: the FAQ entries of a knowledge base, a page at a time
//! (keyset pagination, as `ragscope docs`), or all of them with `--all`;
//! the entries that need review (`--review`); the FAQ tool's answer to a
//! question; or entries drafted from a document by the LLM.

use crate::{core_err, App, UserFacing};
use clap::Args;
use rag_core::{FaqCursor, FaqEntry, FaqQuery, FaqStatus, DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT};
use rag_store::OpenMode;

#[derive(Debug, Args)]
pub struct FaqArgs {
    /// Knowledge base.
    #[arg(long)]
    pub kb: String,
    /// A question: print the FAQ tool's answer for agents ("Q: … A: … Source: …")
    /// instead of listing entries.
    pub question: Option<String>,
    /// Entries per page (1 to 500; by default 50, or 500 when reading
    /// every page).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Start after this cursor (the `next` printed under the previous page).
    #[arg(long)]
    pub cursor: Option<String>,
    /// Every entry, page after page.
    #[arg(long, conflicts_with = "cursor")]
    pub all: bool,
    /// Only entries of this status (approved, pending, disabled).
    #[arg(long, value_parser = parse_status)]
    pub status: Option<FaqStatus>,
    /// Only entries whose question, answer or tags contain this text
    /// (letters A to Z in either case).
    #[arg(long)]
    pub contains: Option<String>,
    /// Only entries that need review (pending, or past their valid_until),
    /// from every page.
    #[arg(long, conflicts_with = "cursor")]
    pub review: bool,
    /// Draft FAQ entries from this document (its id, see GET
    /// /kbs/{kb}/documents) with the configured LLM; replaces the document's
    /// earlier drafts that nobody edited.
    #[arg(long, value_name = "DOC_ID", conflicts_with_all = ["question", "review", "all", "cursor", "status", "contains"])]
    pub draft_from: Option<String>,
    /// Print JSON: one object per page (`faqs`, `next_cursor`, `total`).
    #[arg(long)]
    pub json: bool,
}

fn parse_status(text: &str) -> Result<FaqStatus, String> {
    FaqStatus::parse(text).ok_or_else(|| "expected approved, pending or disabled".into())
}

/// An entry as listed: with whether it expired and needs review.
fn row(e: &FaqEntry, now: i64) -> serde_json::Value {
    let expired = e.valid_until.is_some_and(|u| now > u);
    let review = expired || e.status == FaqStatus::Pending;
    serde_json::json!({
        "id": e.id, "question": e.question, "status": e.status, "edited": e.edited,
        "tags": e.tags, "valid_until": e.valid_until, "expired": expired, "needs_review": review,
    })
}

pub async fn run(app: &App, args: FaqArgs) -> anyhow::Result<()> {
    if let Some(doc) = &args.draft_from {
        return draft_faqs(app, &args.kb, doc, args.json).await;
    }
    let engine = app.engine(OpenMode::ReadOnly)?;
    if let Some(q) = &args.question {
        let text = engine
            .faq_tool(&app.tenant, &args.kb, q, &rag_core::Viewer::Everything)
            .await
            .map_err(core_err)?;
        println!("{text}");
        return Ok(());
    }
    let after = crate::docs_cmd::cursor_flag(args.cursor.as_deref(), FaqCursor::decode)?;
    // Review looks at every page: an expired entry can have any status.
    let all = args.all || args.review;
    let limit = args.limit.unwrap_or(if all {
        MAX_PAGE_LIMIT
    } else {
        DEFAULT_PAGE_LIMIT
    });
    let mut query = FaqQuery {
        after,
        limit,
        status: args.status,
        contains: args.contains.clone(),
        // Counted on the first page shown only.
        with_total: true,
    };
    let now = rag_core::now();
    let mut listed = 0;
    loop {
        let page = engine
            .faqs_page(&app.tenant, &args.kb, &query)
            .await
            .map_err(core_err)?;
        let next = page.next.map(|c| c.encode());
        let rows: Vec<serde_json::Value> = page
            .faqs
            .iter()
            .map(|e| row(e, now))
            .filter(|r| !args.review || r["needs_review"] == true)
            .collect();
        listed += rows.len();
        if args.json {
            println!(
                "{}",
                serde_json::json!({"faqs": rows, "next_cursor": next, "total": page.total})
            );
        } else {
            if let Some(total) = page.total {
                println!("{total} entries in {}", args.kb);
            }
            for r in &rows {
                let flag = if r["expired"] == true {
                    "  ⚠ expired: review"
                } else if r["needs_review"] == true {
                    "  ⚠ pending review"
                } else {
                    ""
                };
                println!(
                    "{}  {:<9} {}{flag}",
                    r["id"].as_str().unwrap_or(""),
                    r["status"].as_str().unwrap_or(""),
                    r["question"].as_str().unwrap_or("")
                );
            }
        }
        match (page.next, all) {
            (Some(c), true) => {
                query.after = Some(c);
                query.with_total = false;
            }
            (Some(_), false) => {
                if !args.json {
                    let mut filters = args
                        .status
                        .map(|s| format!(" --status {}", s.as_str()))
                        .unwrap_or_default();
                    if let Some(text) = &args.contains {
                        filters.push_str(&format!(" --contains {text:?}"));
                    }
                    println!(
                        "{listed} shown; next page: ragscope faq --kb {} --limit {}{filters} --cursor {}",
                        args.kb,
                        limit,
                        next.unwrap_or_default()
                    );
                }
                return Ok(());
            }
            (None, _) => {
                if !args.json && args.review {
                    println!("{listed} entries need review");
                }
                return Ok(());
            }
        }
    }
}

/// `ragscope faq --kb K --draft-from DOC_ID`: drafts FAQ entries with the LLM.
async fn draft_faqs(app: &App, kb: &str, doc: &str, json: bool) -> anyhow::Result<()> {
    let doc_id = rag_core::DocId::parse(doc)
        .ok_or_else(|| UserFacing(format!("{doc:?} is not a document id")))?;
    let engine = app.engine(OpenMode::ReadWrite)?;
    let outcome = match engine
        .draft_faqs(&app.tenant, kb, doc_id, &rag_core::Viewer::Everything)
        .await
    {
        Ok(o) => o,
        Err(rag_engine::DraftFailure::Core(e)) => return Err(core_err(e)),
        Err(
            e @ (rag_engine::DraftFailure::NoLlm | rag_engine::DraftFailure::Restricted { .. }),
        ) => return Err(UserFacing(e.to_string()).into()),
        Err(e) => return Err(anyhow::Error::new(e)),
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&outcome)?);
        return Ok(());
    }
    for e in &outcome.added {
        println!(
            "{:<9} {}\n          {}",
            e.status.as_str(),
            e.question,
            e.answer
        );
    }
    for d in &outcome.dropped {
        println!("  dropped: {d}");
    }
    println!(
        "{} entries drafted by {}, {} earlier unedited drafts replaced, {} dropped",
        outcome.added.len(),
        outcome.generator,
        outcome.replaced,
        outcome.dropped.len()
    );
    Ok(())
}
