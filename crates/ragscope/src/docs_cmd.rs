//! `ragscope docs`: the documents of a knowledge base, a page at a time
//! (keyset pagination: a page costs the same wherever it is), or all of
//! them with `--all`, which pages through the same way.

use crate::{core_err, App, UserFacing};
use clap::Args;
use rag_core::{DocCursor, DocumentInfo, DocumentQuery, Viewer, DEFAULT_PAGE_LIMIT};
use rag_store::OpenMode;

#[derive(Debug, Args)]
pub struct DocsArgs {
    /// Knowledge base.
    #[arg(long)]
    pub kb: String,
    /// Documents per page (1 to 500).
    #[arg(long, default_value_t = DEFAULT_PAGE_LIMIT)]
    pub limit: usize,
    /// Start after this cursor (the `next` printed under the previous page).
    #[arg(long)]
    pub cursor: Option<String>,
    /// Every document, page after page.
    #[arg(long, conflicts_with = "cursor")]
    pub all: bool,
    /// Only the documents stored from this source (file name or URL).
    #[arg(long)]
    pub source: Option<String>,
    /// Print JSON: one object per page (`documents`, `next_cursor`, `total`).
    #[arg(long)]
    pub json: bool,
}

fn line(d: &DocumentInfo) -> String {
    let owner = d
        .owner
        .as_deref()
        .map(|o| format!("  [owner {o}]"))
        .unwrap_or_default();
    format!(
        "{}  {:>4} chunks  {}  ({}){owner}",
        d.id, d.chunks, d.title, d.source
    )
}

/// A listing's `--cursor`, read by `decode`; a clear error when it is not
/// one.
pub(crate) fn cursor_flag<T>(
    text: Option<&str>,
    decode: impl Fn(&str) -> Option<T>,
) -> anyhow::Result<Option<T>> {
    match text {
        None => Ok(None),
        Some(text) => Ok(Some(decode(text).ok_or_else(|| {
            UserFacing(format!(
                "{text:?} is not a cursor of this listing: pass the `next` printed under the previous page"
            ))
        })?)),
    }
}

pub async fn run(app: &App, args: DocsArgs) -> anyhow::Result<()> {
    let after = cursor_flag(args.cursor.as_deref(), DocCursor::decode)?;
    let engine = app.engine(OpenMode::ReadOnly)?;
    let mut query = DocumentQuery {
        // The operator's command line sees every owner's documents.
        viewer: Viewer::Everything,
        after,
        limit: args.limit,
        source: args.source.clone(),
    };
    let mut listed = 0;
    loop {
        let page = engine
            .documents_page(&app.tenant, &args.kb, &query)
            .await
            .map_err(core_err)?;
        let next = page.next.map(|c| c.encode());
        listed += page.documents.len();
        if args.json {
            let documents: Vec<serde_json::Value> = page
                .documents
                .iter()
                .map(|d| {
                    serde_json::json!({
                        "id": d.id, "title": d.title, "source": d.source,
                        "content_hash": d.content_hash, "chunks": d.chunks,
                        "owner": d.owner, "created_at": d.created_at,
                    })
                })
                .collect();
            println!(
                "{}",
                serde_json::json!({"documents": documents, "next_cursor": next, "total": page.total})
            );
        } else {
            if query.after.is_none() || !args.all {
                println!("{} documents in {}", page.total, args.kb);
            }
            for d in &page.documents {
                println!("{}", line(d));
            }
        }
        match (page.next, args.all) {
            (Some(c), true) => query.after = Some(c),
            (Some(_), false) => {
                if !args.json {
                    println!(
                        "{listed} shown; next page: ragscope docs --kb {} --limit {} --cursor {}",
                        args.kb,
                        args.limit,
                        next.unwrap_or_default()
                    );
                }
                return Ok(());
            }
            (None, _) => return Ok(()),
        }
    }
}
