//! `ragscope intents --kb NAME [FILE]`: replaces a knowledge base's intents
//! with those of a JSON Lines file (one intent per line), or lists them.
//! The command line acts as the operator, so webhooks on loopback or
//! private addresses are allowed (as for an admin key).

use crate::cli::read_text;
use crate::{core_err, App, UserFacing};
use clap::Args;
use rag_core::Intent;
use rag_store::OpenMode;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct IntentsArgs {
    /// Knowledge base.
    #[arg(long)]
    pub kb: String,
    /// JSON Lines, one intent per line: {"name", "examples": [...],
    /// "webhook", "threshold"?, "timeout_ms"?}. Without it, the intents are listed.
    pub file: Option<PathBuf>,
    /// Remove every intent.
    #[arg(long, conflicts_with = "file")]
    pub clear: bool,
}

fn parse(text: &str) -> Result<Vec<Intent>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| serde_json::from_str::<Intent>(l).map_err(|e| format!("line {}: {e}", n + 1)))
        .collect()
}

pub async fn run(app: &App, args: IntentsArgs) -> anyhow::Result<()> {
    let mode = if args.file.is_some() || args.clear {
        OpenMode::ReadWrite
    } else {
        OpenMode::ReadOnly
    };
    let engine = app.engine(mode)?;
    let intents = match (&args.file, args.clear) {
        (Some(file), _) => {
            let mut list = parse(&read_text(file)?)
                .map_err(|e| UserFacing(format!("{}: {e}", file.display())))?;
            for i in &mut list {
                i.private_ok = true;
            }
            list
        }
        (None, true) => Vec::new(),
        (None, false) => {
            let kb = engine.kb(&app.tenant, &args.kb).await.map_err(core_err)?;
            for i in &kb.settings.intents {
                println!(
                    "{}\t{} examples\tthreshold {}\ttimeout {} ms\t{}",
                    i.name,
                    i.examples.len(),
                    i.threshold,
                    i.timeout_ms,
                    rag_core::redact::redact_text(&i.webhook)
                );
            }
            if kb.settings.intents.is_empty() {
                println!("no intents");
            }
            return Ok(());
        }
    };
    let n = intents.len();
    engine
        .set_intents(&app.tenant, &args.kb, intents)
        .await
        .map_err(core_err)?;
    println!("{n} intents set on knowledge base {}", args.kb);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_with_defaults_and_bad_lines_are_named() {
        let list = parse(
            "{\"name\":\"order\",\"examples\":[\"where is my order\"],\"webhook\":\"http://127.0.0.1:9/h\"}\n\n",
        )
        .unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].threshold, 0.7);
        let e = parse("{\"name\":\"a\",\"examples\":[\"q\"],\"webhook\":\"https://x\"}\n{oops}\n")
            .unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
    }
}
