//! A running `ragscope serve` for the HTTP tests, and one-request helpers.

#![allow(dead_code)]

use super::{cmd, demo_dir, ok};
use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::Duration;

/// A running server, killed when dropped.
pub struct Served {
    pub child: Child,
    pub addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    pub fn start(data: &std::path::Path, env: &[(&str, &str)]) -> Served {
        let mut c = cmd(data);
        c.env("RAGSCOPE_EMBEDDER__KIND", "none");
        for (k, v) in env {
            c.env(k, v);
        }
        c.args(["serve", "--open", "--addr", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = c.spawn().unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        let addr = loop {
            line.clear();
            assert!(
                out.read_line(&mut line).unwrap() > 0,
                "the server exited before listening"
            );
            if let Some(rest) = line.split("listening on http://").nth(1) {
                break rest
                    .split(|c: char| c.is_whitespace() || c == '/')
                    .next()
                    .unwrap()
                    .to_owned();
            }
        };
        std::thread::spawn(move || for _ in out.lines() {});
        Served { child, addr }
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// One HTTP/1.1 request; returns (status, body).
    pub fn request(&self, method: &str, path: &str, ctype: &str, body: &[u8]) -> (u16, String) {
        let (status, _, body) = self.request_with_headers(method, path, ctype, body);
        (status, body)
    }

    /// One HTTP/1.1 request; returns (status, the response's header lines, body).
    pub fn request_with_headers(
        &self,
        method: &str,
        path: &str,
        ctype: &str,
        body: &[u8],
    ) -> (u16, String, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.addr,
            body.len()
        )
        .unwrap();
        s.write_all(body).unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let text = String::from_utf8_lossy(&raw).into_owned();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        (status, head.to_ascii_lowercase(), body.to_owned())
    }

    /// Uploads one file; returns the SSE body (every event of the upload).
    pub fn upload(&self, kb: &str, name: &str, bytes: &[u8]) -> String {
        let boundary = "ragscope-hostile-boundary-7f3a";
        let mut body = Vec::new();
        write!(
            body,
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        )
        .unwrap();
        body.extend_from_slice(bytes);
        write!(body, "\r\n--{boundary}--\r\n").unwrap();
        let (status, text) = self.request(
            "POST",
            &format!("/api/v1/kbs/{kb}/documents"),
            &format!("multipart/form-data; boundary={boundary}"),
            &body,
        );
        assert_eq!(status, 200, "upload of {name}: {text}");
        text
    }

    /// Asks a question; asserts the pipeline ran to `done`.
    pub fn query_ok(&self, kb: &str, q: &str) {
        let body = serde_json::json!({ "query": q }).to_string();
        let (status, text) = self.request(
            "POST",
            &format!("/api/v1/kbs/{kb}/query"),
            "application/json",
            body.as_bytes(),
        );
        assert_eq!(status, 200, "query: {text}");
        assert!(text.contains("event: done"), "query did not finish: {text}");
    }
}

/// A data directory with the demo loaded, lexical only; the directory
/// lives as long as the returned guard.
pub fn demo_without_vectors() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut c = cmd(&data);
    c.env("RAGSCOPE_EMBEDDER__KIND", "none")
        .args(["demo", "--dir"])
        .arg(demo_dir());
    ok(c);
    (dir, data)
}
