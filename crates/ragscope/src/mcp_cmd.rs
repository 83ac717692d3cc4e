//! `ragscope mcp`: MCP over standard input and output, for an agent that
//! starts ragscope itself. Standard output carries protocol messages only;
//! logs go to standard error. The agent acts as the operator of the
//! configured tenant, as every command does.

use crate::App;
use rag_store::OpenMode;
use std::net::SocketAddr;

pub(crate) async fn run(app: App) -> anyhow::Result<()> {
    let (store, keys) = app.stores(OpenMode::ReadWrite)?;
    let engine = app.engine_with(store)?;
    // No socket is opened; the limits are the server's.
    let config =
        crate::serve::server_config(&app, SocketAddr::from(([127, 0, 0, 1], 0)), false, false);
    let state = rag_server::AppState::new(engine, keys, config);
    tracing::info!("serving MCP on standard input and output");
    rag_server::serve_mcp_stdio(
        state,
        app.tenant.clone(),
        tokio::io::stdin(),
        tokio::io::stdout(),
    )
    .await?;
    Ok(())
}
