//! [`HttpWebhook`]: posts a routed question to an intent's webhook and reads
//! its JSON reply, within the intent's timeout and a size cap. Unless the
//! intent was configured by an admin (`allow_private`), loopback, private
//! and link-local addresses are refused, by the same address check as URL
//! sources (on every address a host name resolves to); redirects are not
//! followed.

use crate::fetch::{literal_private, Blocked, PublicOnly};
use async_trait::async_trait;
use rag_core::{Webhook, WebhookCall, WebhookReply};
use std::sync::Arc;
use std::time::Duration;

/// Largest webhook reply read, in bytes.
const MAX_REPLY_BYTES: usize = 1024 * 1024;

/// Calls intent webhooks over HTTP(S).
#[derive(Clone)]
pub struct HttpWebhook {
    public: reqwest::Client,
    any: reqwest::Client,
}

impl std::fmt::Debug for HttpWebhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HttpWebhook")
    }
}

impl Default for HttpWebhook {
    fn default() -> Self {
        Self::new()
    }
}

impl HttpWebhook {
    /// A client for public webhooks and one for admin-configured ones.
    pub fn new() -> Self {
        let base = || {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .user_agent(concat!(
                    "ragscope/",
                    env!("CARGO_PKG_VERSION"),
                    " (intent webhook)"
                ))
        };
        let public = base()
            .dns_resolver(Arc::new(PublicOnly))
            .build()
            .unwrap_or_default();
        let any = base().build().unwrap_or_default();
        HttpWebhook { public, any }
    }
}

fn describe(e: &reqwest::Error, timeout: Duration) -> String {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(b) = s.downcast_ref::<Blocked>() {
            return format!("the webhook's address {} is not public", b.0);
        }
        source = s.source();
    }
    if e.is_timeout() {
        format!("no reply within {} ms", timeout.as_millis())
    } else {
        // reqwest's text names the URL, which may carry credentials.
        format!("network error: {}", e.without_url_ref())
    }
}

trait WithoutUrlRef {
    fn without_url_ref(&self) -> String;
}

impl WithoutUrlRef for reqwest::Error {
    fn without_url_ref(&self) -> String {
        let mut text = self.to_string();
        if let Some(u) = self.url() {
            text = text.replace(u.as_str(), "<webhook>");
        }
        text
    }
}

#[async_trait]
impl Webhook for HttpWebhook {
    async fn call(
        &self,
        url: &str,
        call: &WebhookCall,
        timeout: Duration,
        allow_private: bool,
    ) -> Result<WebhookReply, String> {
        let parsed =
            reqwest::Url::parse(url).map_err(|_| "the webhook URL does not parse".to_owned())?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err("the webhook is not an http or https URL".into());
        }
        if !allow_private {
            if let Some(host) = literal_private(&parsed) {
                return Err(format!("the webhook's address {host} is not public"));
            }
        }
        let client = if allow_private {
            &self.any
        } else {
            &self.public
        };
        let work = async {
            let mut res = client
                .post(parsed)
                .json(call)
                .send()
                .await
                .map_err(|e| describe(&e, timeout))?;
            let status = res.status();
            if !status.is_success() {
                return Err(format!("the webhook answered HTTP {}", status.as_u16()));
            }
            let mut body = Vec::new();
            while let Some(chunk) = res.chunk().await.map_err(|e| describe(&e, timeout))? {
                if body.len() + chunk.len() > MAX_REPLY_BYTES {
                    return Err(format!(
                        "the webhook's reply is over {MAX_REPLY_BYTES} bytes"
                    ));
                }
                body.extend_from_slice(&chunk);
            }
            serde_json::from_slice::<WebhookReply>(&body)
                .map_err(|e| format!("the webhook's reply is not {{answer, sources?}}: {e}"))
        };
        tokio::time::timeout(timeout, work)
            .await
            .unwrap_or_else(|_| Err(format!("no reply within {} ms", timeout.as_millis())))
    }
}
