//! Intent routes: questions of a kind the knowledge base should not answer
//! (an order's status, a booking) go to a tool instead. Each intent has
//! example questions and a webhook; a question matched to an intent above
//! its threshold is answered by the webhook, and the normal pipeline runs
//! when none matches or the webhook fails.

use crate::error::UserError;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Most intents per knowledge base.
pub const MAX_INTENTS: usize = 100;
/// Most example questions per intent.
pub const MAX_INTENT_EXAMPLES: usize = 50;
/// Longest example question or intent name, in bytes.
pub const MAX_INTENT_TEXT: usize = 500;
/// Longest webhook call allowed, in milliseconds.
pub const MAX_WEBHOOK_TIMEOUT_MS: u64 = 30_000;

/// One intent of a knowledge base.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Intent {
    /// Its name, unique in the knowledge base (sent to the webhook).
    pub name: String,
    /// Example questions; a question is matched against each.
    pub examples: Vec<String>,
    /// The http or https URL the matched question is posted to.
    pub webhook: String,
    /// The match score (0–1) a question needs to be routed here.
    #[serde(default = "default_threshold")]
    pub threshold: f64,
    /// Longest wait for the webhook's reply, in milliseconds.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Whether the webhook may be on a loopback or private address. Set by
    /// the server from the caller (an admin key, or the local CLI), never
    /// taken from a request body.
    #[serde(default)]
    pub private_ok: bool,
}

fn default_threshold() -> f64 {
    0.7
}

fn default_timeout_ms() -> u64 {
    3_000
}

fn invalid(reason: String) -> UserError {
    UserError::InvalidParam {
        name: "intents",
        reason,
    }
}

/// Checks a knowledge base's intent list: sizes, unique names, thresholds,
/// timeouts and webhook URLs.
pub fn validate_intents(intents: &[Intent]) -> Result<(), UserError> {
    if intents.len() > MAX_INTENTS {
        return Err(invalid(format!(
            "{} intents; the limit is {MAX_INTENTS}",
            intents.len()
        )));
    }
    let mut names = std::collections::HashSet::new();
    for i in intents {
        let name = i.name.trim();
        if name.is_empty() || name.len() > MAX_INTENT_TEXT {
            return Err(invalid(format!(
                "an intent's name has 1 to {MAX_INTENT_TEXT} bytes"
            )));
        }
        if !names.insert(name.to_owned()) {
            return Err(invalid(format!("the intent name {name:?} is used twice")));
        }
        if i.examples.is_empty() || i.examples.len() > MAX_INTENT_EXAMPLES {
            return Err(invalid(format!(
                "intent {name:?} has {} examples; it needs 1 to {MAX_INTENT_EXAMPLES}",
                i.examples.len()
            )));
        }
        if let Some(e) = i
            .examples
            .iter()
            .find(|e| e.trim().is_empty() || e.len() > MAX_INTENT_TEXT)
        {
            return Err(invalid(format!(
                "intent {name:?}: an example of {} bytes; each has 1 to {MAX_INTENT_TEXT}",
                e.len()
            )));
        }
        if !(i.threshold.is_finite() && (0.0..=1.0).contains(&i.threshold)) {
            return Err(invalid(format!(
                "intent {name:?}: threshold {} is outside 0 to 1",
                i.threshold
            )));
        }
        if i.timeout_ms == 0 || i.timeout_ms > MAX_WEBHOOK_TIMEOUT_MS {
            return Err(invalid(format!(
                "intent {name:?}: timeout_ms {} is outside 1 to {MAX_WEBHOOK_TIMEOUT_MS}",
                i.timeout_ms
            )));
        }
        let scheme_ok = i.webhook.starts_with("http://") || i.webhook.starts_with("https://");
        if !scheme_ok || i.webhook.len() > 2048 || i.webhook.chars().any(char::is_whitespace) {
            return Err(invalid(format!(
                "intent {name:?}: the webhook is an http or https URL"
            )));
        }
    }
    Ok(())
}

/// Whether a webhook URL names a loopback, private or link-local address
/// literally (or `localhost`). A save-time check for callers that may not
/// configure such webhooks; the call itself checks every resolved address.
pub fn webhook_is_local(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if host == "localhost" || host.ends_with(".localhost") || host.is_empty() {
        return true;
    }
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => {
            ip.is_loopback()
                || ip.is_private()
                || ip.is_link_local()
                || ip.is_unspecified()
                || ip.octets()[0] == 0
        }
        Ok(std::net::IpAddr::V6(ip)) => {
            ip.is_loopback()
                || ip.is_unspecified()
                || (ip.segments()[0] & 0xfe00) == 0xfc00
                || (ip.segments()[0] & 0xffc0) == 0xfe80
                || ip
                    .to_ipv4_mapped()
                    .is_some_and(|v4| v4.is_loopback() || v4.is_private() || v4.is_link_local())
        }
        Err(_) => false,
    }
}

/// What a webhook receives.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WebhookCall {
    /// The matched intent's name.
    pub intent: String,
    /// The question as asked.
    pub question: String,
    /// The conversation, if the question continues one.
    pub conversation_id: Option<String>,
    /// The knowledge base's name.
    pub kb: String,
    /// The tenant.
    pub tenant: String,
}

/// A source a webhook's answer names (an order page, a ticket).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WebhookSource {
    /// Its title.
    pub title: String,
    /// Its URL, if any.
    #[serde(default)]
    pub url: Option<String>,
}

/// What a webhook replies.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WebhookReply {
    /// The answer to show.
    pub answer: String,
    /// Sources of the answer.
    #[serde(default)]
    pub sources: Vec<WebhookSource>,
}

/// Calls intent webhooks.
#[async_trait]
pub trait Webhook: Send + Sync {
    /// Posts `call` to `url` as JSON and reads the reply, within `timeout`.
    /// Loopback and private addresses are refused unless `allow_private`.
    /// The error is a message for the event stream (no URL credentials).
    async fn call(
        &self,
        url: &str,
        call: &WebhookCall,
        timeout: Duration,
        allow_private: bool,
    ) -> Result<WebhookReply, String>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent(name: &str) -> Intent {
        Intent {
            name: name.into(),
            examples: vec!["我的订单到哪了".into()],
            webhook: "https://tools.example/orders".into(),
            threshold: 0.7,
            timeout_ms: 3000,
            private_ok: false,
        }
    }

    #[test]
    fn intent_lists_are_checked() {
        assert!(validate_intents(&[intent("order"), intent("refund")]).is_ok());
        assert!(validate_intents(&[intent("order"), intent("order")]).is_err());
        let mut bad = intent("order");
        bad.threshold = 1.5;
        assert!(validate_intents(&[bad]).is_err());
        let mut bad = intent("order");
        bad.webhook = "file:///etc/passwd".into();
        assert!(validate_intents(&[bad]).is_err());
        let mut bad = intent("order");
        bad.examples.clear();
        assert!(validate_intents(&[bad]).is_err());
        let mut bad = intent("order");
        bad.timeout_ms = 0;
        assert!(validate_intents(&[bad]).is_err());
    }

    #[test]
    fn local_webhooks_are_recognised() {
        for url in [
            "http://127.0.0.1:9000/h",
            "http://localhost/h",
            "http://user:pw@10.1.2.3/h",
            "http://[::1]:80/h",
            "http://[::ffff:192.168.0.1]/h",
            "http://0.0.0.0/",
        ] {
            assert!(webhook_is_local(url), "{url}");
        }
        for url in [
            "https://tools.example/h",
            "http://8.8.8.8/h",
            "https://[2001:db8::1]/",
        ] {
            assert!(!webhook_is_local(url), "{url}");
        }
    }

    #[test]
    fn defaults_apply_and_unknown_fields_are_refused() {
        let i: Intent = serde_json::from_str(
            r#"{"name":"order","examples":["where is my order"],"webhook":"https://x.example/h"}"#,
        )
        .unwrap();
        assert_eq!(
            (i.threshold, i.timeout_ms, i.private_ok),
            (0.7, 3000, false)
        );
        assert!(serde_json::from_str::<Intent>(
            r#"{"name":"o","examples":["q"],"webhook":"https://x","extra":1}"#
        )
        .is_err());
    }
}
