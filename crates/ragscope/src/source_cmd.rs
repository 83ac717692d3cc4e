//! `ragscope source`: URL sources from the command line (add and sync, sync
//! again, list, remove), with each page's outcome printed as it is done.

use crate::{core_err, App};
use clap::Subcommand;
use rag_core::{PageOutcome, Source, SourceId, SourcePage, Viewer};
use rag_store::OpenMode;

#[derive(Debug, Subcommand)]
pub enum SourceCommand {
    /// Add a URL (optionally its same-site links to a depth) and sync it now.
    Add {
        /// Knowledge base.
        #[arg(long)]
        kb: String,
        /// The start page (http or https).
        url: String,
        /// Follow same-site links this many levels deep (0: the page only).
        #[arg(long, default_value_t = 0)]
        depth: u32,
        /// At most this many pages per sync.
        #[arg(long, default_value_t = 50)]
        max_pages: u32,
    },
    /// Sync sources again: only changed pages are re-indexed.
    Sync {
        /// Knowledge base.
        #[arg(long)]
        kb: String,
        /// Source ids (all sources of the knowledge base when none are given).
        ids: Vec<String>,
    },
    /// List sources with the status of their last sync.
    List {
        /// Knowledge base.
        #[arg(long)]
        kb: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a source and the documents of its pages.
    Remove {
        /// Knowledge base.
        #[arg(long)]
        kb: String,
        /// Source id.
        id: String,
    },
}

fn print_page(p: &SourcePage) {
    let mark = match p.outcome {
        PageOutcome::Indexed => "indexed  ",
        PageOutcome::Unchanged => "unchanged",
        PageOutcome::Failed => "FAILED   ",
        PageOutcome::Removed => "removed  ",
    };
    match &p.reason {
        Some(r) => println!("  {mark} {}  ({r})", p.url),
        None => println!("  {mark} {}", p.url),
    }
}

fn summary(s: &Source) {
    let count = |o: PageOutcome| s.pages.iter().filter(|p| p.outcome == o).count();
    println!(
        "{} {}: {} — {} indexed, {} unchanged, {} failed, {} removed{}",
        s.id,
        s.url,
        s.status.as_str(),
        count(PageOutcome::Indexed),
        count(PageOutcome::Unchanged),
        count(PageOutcome::Failed),
        count(PageOutcome::Removed),
        s.reason
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default()
    );
}

fn parse_id(s: &str) -> anyhow::Result<SourceId> {
    SourceId::parse(s).ok_or_else(|| {
        crate::UserFacing(format!(
            "{s:?} is not a source id (see: ragscope source list)"
        ))
        .into()
    })
}

pub async fn run(app: &App, command: SourceCommand) -> anyhow::Result<()> {
    // The operator's command line sees every owner's sources.
    let all = Viewer::Everything;
    match command {
        SourceCommand::Add {
            kb,
            url,
            depth,
            max_pages,
        } => {
            let engine = app.engine(OpenMode::ReadWrite)?;
            let new = rag_engine::NewSource {
                url,
                depth: Some(depth),
                max_pages: Some(max_pages),
            };
            let source = engine
                .add_source(&app.tenant, &kb, new, None)
                .await
                .map_err(core_err)?;
            let synced = engine
                .sync_source(&app.tenant, &kb, source.id, &all, &mut print_page)
                .await
                .map_err(core_err)?;
            summary(&synced);
        }
        SourceCommand::Sync { kb, ids } => {
            let engine = app.engine(OpenMode::ReadWrite)?;
            let ids: Vec<SourceId> = if ids.is_empty() {
                engine
                    .sources(&app.tenant, &kb, &all)
                    .await
                    .map_err(core_err)?
                    .into_iter()
                    .map(|s| s.id)
                    .collect()
            } else {
                ids.iter()
                    .map(|s| parse_id(s))
                    .collect::<anyhow::Result<_>>()?
            };
            for id in ids {
                let synced = engine
                    .sync_source(&app.tenant, &kb, id, &all, &mut print_page)
                    .await
                    .map_err(core_err)?;
                summary(&synced);
            }
        }
        SourceCommand::List { kb, json } => {
            let engine = app.engine(OpenMode::ReadOnly)?;
            let sources = engine
                .sources(&app.tenant, &kb, &all)
                .await
                .map_err(core_err)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&sources)?);
            } else if sources.is_empty() {
                println!("no URL sources; add one with: ragscope source add --kb {kb} URL");
            } else {
                sources.iter().for_each(summary);
            }
        }
        SourceCommand::Remove { kb, id } => {
            let engine = app.engine(OpenMode::ReadWrite)?;
            engine
                .delete_source(&app.tenant, &kb, parse_id(&id)?, &all)
                .await
                .map_err(core_err)?;
            println!("removed source {id} and its documents");
        }
    }
    Ok(())
}
