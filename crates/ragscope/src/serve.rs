//! `ragscope serve`: the HTTP API over the embedded store.

use crate::cli::ServeArgs;
use crate::{App, UserFacing};
use anyhow::Context;
use rag_store::OpenMode;
use std::net::SocketAddr;

pub(crate) async fn run(app: App, args: ServeArgs) -> anyhow::Result<()> {
    let c = &app.config.server;
    let addr_text = args.addr.clone().unwrap_or_else(|| c.addr.clone());
    let addr: SocketAddr = addr_text.parse().map_err(|_| {
        UserFacing(format!(
            "server address {addr_text:?} is not host:port, e.g. 127.0.0.1:3210"
        ))
    })?;
    if args.open && !addr.ip().is_loopback() {
        return Err(UserFacing(format!(
            "--open serves without API keys and is only allowed on a loopback address, not {addr}"
        ))
        .into());
    }
    // The segmenter's dictionary (about 0.1 s) is loaded before the server
    // listens, off the runtime, so that the first query does not share the
    // cores with it.
    tokio::task::spawn_blocking(rag_text::Analyzer::preload)
        .await
        .context("loading the segmenter's dictionary")?;
    let (store, keys) = app.stores(OpenMode::ReadWrite)?;
    if let Some(key) = rag_server::ensure_admin_key(keys.as_ref())
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?
    {
        // Shown once; only its hash is stored.
        println!("Created the admin API key (shown only this once; store it now):\n\n    {key}\n");
    }
    let engine = app.server_engine(store)?;
    let config = server_config(&app, addr, args.open, args.log_queries);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr()?;
    // Scripts and tests read this line to find an ephemeral port.
    println!(
        "ragscope listening on http://{local}{}",
        if args.open {
            " (open mode: no API key needed)"
        } else {
            ""
        }
    );
    let state = rag_server::AppState::new(engine, keys, config);
    // On SIGTERM or SIGINT in-flight requests get a grace period; then the
    // server stops whatever is still running (streams, uploads): their
    // futures are dropped, extraction workers killed, and `main` does not
    // wait for blocking work, so the process (and its data-directory lock)
    // is gone within seconds. Every store write is one transaction, so
    // nothing is half-written.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop_tx.send(true);
    });
    let mut graceful = stop_rx.clone();
    let server = rag_server::serve(listener, state, async move {
        let _ = graceful.wait_for(|s| *s).await;
    });
    let mut deadline = stop_rx;
    tokio::select! {
        r = server => r.context("server failed")?,
        _ = async {
            let _ = deadline.wait_for(|s| *s).await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => {
            eprintln!(
                "ragscope: in-flight requests did not finish within {} s; stopping them",
                SHUTDOWN_GRACE.as_secs()
            );
        }
    }
    println!("ragscope stopped");
    Ok(())
}

/// The server's settings from the configuration (`ragscope mcp` uses the
/// same limits).
pub(crate) fn server_config(
    app: &App,
    addr: SocketAddr,
    open: bool,
    log_queries: bool,
) -> rag_server::ServerConfig {
    let c = &app.config.server;
    rag_server::ServerConfig {
        addr,
        open,
        log_queries: log_queries || c.log_queries,
        limits: rag_server::Limits {
            max_json_bytes: c.max_json_bytes,
            max_upload_bytes: c.max_upload_bytes,
            max_files_per_upload: c.max_files_per_upload,
            max_top_k: c.max_top_k,
            max_concurrent_queries_per_key: c.max_concurrent_queries_per_key,
            max_concurrent_ingests_per_key: c.max_concurrent_ingests_per_key,
        },
        cors_origins: c.cors_origins.clone(),
    }
}

/// How long in-flight requests may run on after a stop signal.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
