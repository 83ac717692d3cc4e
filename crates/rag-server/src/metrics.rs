//! Prometheus metrics in the text exposition format: request counts and
//! latencies per route, pipeline stage latencies, and the kb_miss count.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

/// Histogram bucket bounds, in seconds.
const BUCKETS: [f64; 13] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, secs: f64) {
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                self.counts[i] += 1;
            }
        }
        self.count += 1;
        self.sum += secs;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        for (i, b) in BUCKETS.iter().enumerate() {
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}le=\"{b}\"}} {}",
                self.counts[i]
            );
        }
        let _ = writeln!(out, "{name}_bucket{{{labels}le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(
            out,
            "{name}_sum{{{}}} {}",
            labels.trim_end_matches(','),
            self.sum
        );
        let _ = writeln!(
            out,
            "{name}_count{{{}}} {}",
            labels.trim_end_matches(','),
            self.count
        );
    }
}

#[derive(Debug, Default)]
struct Inner {
    requests: BTreeMap<(String, String, u16), u64>,
    latency: BTreeMap<String, Histogram>,
    stages: BTreeMap<String, Histogram>,
    kb_miss: u64,
    queries: u64,
}

/// The server's metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Metrics {
    /// Records a finished request.
    pub fn request(&self, method: &str, route: &str, status: u16, secs: f64) {
        let mut m = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        *m.requests
            .entry((method.to_owned(), route.to_owned(), status))
            .or_default() += 1;
        m.latency.entry(route.to_owned()).or_default().observe(secs);
    }

    /// Records a finished query's stage timings (milliseconds) and whether it missed.
    pub fn query(&self, stages: &[(String, f64)], kb_miss: bool) {
        let mut m = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        m.queries += 1;
        if kb_miss {
            m.kb_miss += 1;
        }
        for (stage, ms) in stages {
            m.stages
                .entry(stage.clone())
                .or_default()
                .observe(ms / 1000.0);
        }
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        let m = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = String::new();
        out.push_str(
            "# HELP ragscope_http_requests_total HTTP requests by method, route and status.\n",
        );
        out.push_str("# TYPE ragscope_http_requests_total counter\n");
        for ((method, route, status), n) in &m.requests {
            let _ = writeln!(
                out,
                "ragscope_http_requests_total{{method=\"{}\",route=\"{}\",status=\"{status}\"}} {n}",
                escape(method),
                escape(route)
            );
        }
        out.push_str("# HELP ragscope_http_request_duration_seconds Request latency by route.\n");
        out.push_str("# TYPE ragscope_http_request_duration_seconds histogram\n");
        for (route, h) in &m.latency {
            h.render(
                &mut out,
                "ragscope_http_request_duration_seconds",
                &format!("route=\"{}\",", escape(route)),
            );
        }
        out.push_str("# HELP ragscope_pipeline_stage_seconds Pipeline stage latency.\n");
        out.push_str("# TYPE ragscope_pipeline_stage_seconds histogram\n");
        for (stage, h) in &m.stages {
            h.render(
                &mut out,
                "ragscope_pipeline_stage_seconds",
                &format!("stage=\"{}\",", escape(stage)),
            );
        }
        out.push_str("# HELP ragscope_queries_total Queries that completed.\n# TYPE ragscope_queries_total counter\n");
        let _ = writeln!(out, "ragscope_queries_total {}", m.queries);
        out.push_str("# HELP ragscope_kb_miss_total Queries the knowledge base could not answer.\n# TYPE ragscope_kb_miss_total counter\n");
        let _ = writeln!(out, "ragscope_kb_miss_total {}", m.kb_miss);
        out
    }
}
