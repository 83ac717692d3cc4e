//! MCP over stdio (`ragscope mcp`): one JSON-RPC message per line on
//! standard input, one per line on standard output, and nothing else on
//! standard output (logs go to standard error). Requests run concurrently;
//! their responses are written whole, one line each, as they finish. The
//! caller is the local operator (as on the command line); standard input's
//! end ends the server once the running requests have answered.

use super::jsonrpc::{self, Incoming};
use super::server;
use crate::protocols::access::Access;
use crate::state::AppState;
use rag_core::TenantId;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// Serves MCP on `input`/`output` for `tenant` until `input` ends.
pub async fn serve_mcp_stdio<R, W>(
    state: AppState,
    tenant: TenantId,
    input: R,
    mut output: W,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let access = Arc::new(Access::operator(tenant));
    let (tx, mut rx) = tokio::sync::mpsc::channel::<serde_json::Value>(64);
    let writer = tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            let mut line = serde_json::to_vec(&msg).unwrap_or_default();
            line.push(b'\n');
            output.write_all(&line).await?;
            output.flush().await?;
        }
        Ok::<(), std::io::Error>(())
    });
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    let mut running = tokio::task::JoinSet::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line).await? == 0 {
            break;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match jsonrpc::parse(&line) {
            Err(reply) => {
                let _ = tx.send(reply).await;
            }
            Ok(Incoming::Request { id, method, params }) if method == "initialize" => {
                let (result, version) = server::initialize(&params);
                tracing::info!(version, "mcp session initialized (stdio)");
                let _ = tx.send(jsonrpc::result(&id, result)).await;
            }
            Ok(Incoming::Request { id, method, params }) => {
                let (state, access, tx) = (state.clone(), access.clone(), tx.clone());
                running.spawn(async move {
                    let outcome = server::call(&state, &access, &method, &params).await;
                    let _ = tx.send(jsonrpc::respond(&id, outcome)).await;
                });
            }
            Ok(Incoming::Notification { .. } | Incoming::Response) => {}
        }
        // Reap finished requests so the set does not grow.
        while running.try_join_next().is_some() {}
    }
    while running.join_next().await.is_some() {}
    drop(tx);
    writer.await.map_err(std::io::Error::other)?
}
