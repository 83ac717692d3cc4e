//! The Model Context Protocol server: the tools of [`tools`] over stdio
//! ([`stdio`], `ragscope mcp`) and over streamable HTTP ([`http`], `/mcp`
//! of `ragscope serve`), with the methods of [`server`] and the messages of
//! [`jsonrpc`], implemented here (no MCP crate).

pub(crate) mod http;
pub(crate) mod jsonrpc;
pub(crate) mod server;
pub(crate) mod stdio;
pub(crate) mod tools;
