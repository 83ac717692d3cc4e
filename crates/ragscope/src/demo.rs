//! `ragscope demo`: load the demo knowledge base and ask it a first question.

use crate::cli::{collect_files, DemoArgs};
use crate::{core_err, render, App, UserFacing};
use futures::StreamExt;
use rag_core::{QueryRequest, UserError};
use rag_engine::{parse_facts_tsv, parse_synonyms_tsv};
use rag_store::OpenMode;

pub async fn run(app: &App, args: DemoArgs) -> anyhow::Result<()> {
    let dir = &args.dir;
    if !dir.join("faq.jsonl").exists() {
        return Err(UserFacing(format!(
            "{} does not hold the demo knowledge base (faq.jsonl missing)",
            dir.display()
        ))
        .into());
    }
    let engine = app.engine(OpenMode::ReadWrite)?;
    let settings = rag_core::KbSettings {
        retrieval: app.config.retrieval.clone(),
        ..Default::default()
    };
    match engine.create_kb(&app.tenant, &args.kb, settings).await {
        Ok(_) => println!("created knowledge base {}", args.kb),
        Err(rag_core::CoreError::User(UserError::KbExists { .. })) => {
            println!("knowledge base {} exists; refreshing it", args.kb)
        }
        Err(e) => return Err(core_err(e)),
    }
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).map_err(|e| UserFacing(format!("{name}: {e}")))
    };
    let synonyms = engine
        .add_synonyms(
            &app.tenant,
            &args.kb,
            parse_synonyms_tsv(&read("synonyms.tsv")?),
        )
        .await
        .map_err(core_err)?;
    let facts =
        parse_facts_tsv(&read("facts.tsv")?).map_err(|e| UserFacing(format!("facts.tsv: {e}")))?;
    let facts = engine
        .put_facts(&app.tenant, &args.kb, facts)
        .await
        .map_err(core_err)?;
    let mut files = vec![dir.join("faq.jsonl")];
    files.extend(collect_files(&[dir.join("docs")])?);
    for f in &files {
        let bytes = std::fs::read(f)?;
        let source = f.strip_prefix(dir).unwrap_or(f).display().to_string();
        let outcome = engine
            .ingest(&app.tenant, &args.kb, &source, bytes)
            .await
            .map_err(core_err)?;
        println!("{}", render::ingest_line(&outcome));
    }
    println!("{synonyms} synonym groups and {facts} facts added or updated\n");
    let request = QueryRequest {
        kb: args.kb.clone(),
        query: args.query.clone(),
        params: None,
        overrides: Default::default(),
        filters: Default::default(),
        generate: true,
        conversation_id: None,
    };
    let mut events = engine.query_with(
        &app.tenant,
        request,
        rag_engine::QueryOptions::for_viewer(rag_core::Viewer::Everything),
    );
    while let Some(e) = events.next().await {
        print!("{}", render::event(&e));
    }
    let me = std::env::args().next().unwrap_or_else(|| "ragscope".into());
    println!(
        "\nAsk your own question:  {me} query --kb {} \"營業時間是幾點\"",
        args.kb
    );
    Ok(())
}
