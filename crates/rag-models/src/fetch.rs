//! [`HttpFetcher`]: reads web pages for URL sources, within limits (time,
//! size, redirects) and, unless allowed, never from loopback, private or
//! link-local addresses (a server that fetches URLs for its users must not
//! become a way into the network it runs in). The check is made on every
//! address a host name resolves to, at connection time, and on every
//! redirect target written as an IP address.

use async_trait::async_trait;
use rag_core::{FetchError, FetchedPage, Fetcher};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// Limits of the fetcher.
#[derive(Debug, Clone)]
pub struct FetchConfig {
    /// Whole request (connect, headers and body), in milliseconds.
    pub timeout_ms: u64,
    /// Largest body, in bytes.
    pub max_bytes: u64,
    /// Most redirects followed.
    pub max_redirects: usize,
    /// Allow loopback, private and link-local addresses (tests, intranets).
    pub allow_private: bool,
    /// A proxy for URL sources (`http://proxy:3128`). Without one, no proxy
    /// is used, whatever `HTTP_PROXY` and friends say: the address check
    /// needs to see the address actually dialled. With one, host names are
    /// resolved by the proxy, which must then enforce its own policy; IP
    /// literals and redirects to them are still checked here.
    pub proxy: Option<String>,
}

impl Default for FetchConfig {
    fn default() -> Self {
        FetchConfig {
            timeout_ms: 15_000,
            max_bytes: 10 * 1024 * 1024,
            max_redirects: 5,
            allow_private: false,
            proxy: None,
        }
    }
}

/// Whether an address is loopback, private, link-local, unspecified,
/// carrier-grade NAT, multicast, reserved or otherwise not on the public
/// internet. IPv6 forms that carry an IPv4 address (mapped, compatible,
/// translated, NAT64, 6to4) are judged by that address; local-use NAT64
/// and Teredo, which tunnel to addresses that cannot be checked here, are
/// refused outright.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                || o[0] >= 240
                || (o[0] == 100 && (64..128).contains(&o[1]))
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || (o[0] == 198 && (18..20).contains(&o[1]))
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            let v4_at = |hi: u16, lo: u16| {
                IpAddr::V4(std::net::Ipv4Addr::new(
                    (hi >> 8) as u8,
                    hi as u8,
                    (lo >> 8) as u8,
                    lo as u8,
                ))
            };
            // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible, and :: and ::1).
            if s[..5] == [0; 5] && (s[5] == 0xffff || s[5] == 0) {
                return s[5] == 0 && s[6] == 0 && s[7] <= 1 || is_private(v4_at(s[6], s[7]));
            }
            // ::ffff:0:a.b.c.d (IPv4-translated).
            if s[..4] == [0; 4] && s[4] == 0xffff && s[5] == 0 {
                return is_private(v4_at(s[6], s[7]));
            }
            // 64:ff9b::a.b.c.d (well-known NAT64 prefix).
            if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                return is_private(v4_at(s[6], s[7]));
            }
            // 2002:a.b.c.d::/48 (6to4).
            if s[0] == 0x2002 {
                return is_private(v4_at(s[1], s[2]));
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1) // 64:ff9b:1::/48 local-use NAT64
                || (s[0] == 0x2001 && s[1] == 0) // 2001::/32 Teredo
                || (s[0] == 0x2001 && s[1] == 0xdb8) // documentation
                || (s[0] == 0x100 && s[1..4] == [0, 0, 0]) // 100::/64 discard
                || (s[0] & 0xfe00) == 0xfc00 // unique local
                || (s[0] & 0xffc0) == 0xfe80 // link-local
                || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
        }
    }
}

/// The resolver's refusal, found again in the error chain.
#[derive(Debug)]
pub(crate) struct Blocked(pub(crate) String);

impl std::fmt::Display for Blocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} resolves to a private address", self.0)
    }
}
impl std::error::Error for Blocked {}

/// Resolves with the system resolver and drops private addresses.
pub(crate) struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> =
                addrs.into_iter().filter(|a| !is_private(a.ip())).collect();
            if public.is_empty() {
                return Err(Box::new(Blocked(host)) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// A redirect refused because its target is a private IP address.
#[derive(Debug)]
struct BlockedRedirect(String);

impl std::fmt::Display for BlockedRedirect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "redirect to private address {}", self.0)
    }
}
impl std::error::Error for BlockedRedirect {}

/// Too many redirects.
#[derive(Debug)]
struct TooManyRedirects;

impl std::fmt::Display for TooManyRedirects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("too many redirects")
    }
}
impl std::error::Error for TooManyRedirects {}

pub(crate) fn literal_private(url: &reqwest::Url) -> Option<String> {
    match url.host()? {
        url::Host::Ipv4(ip) if is_private(IpAddr::V4(ip)) => Some(ip.to_string()),
        url::Host::Ipv6(ip) if is_private(IpAddr::V6(ip)) => Some(ip.to_string()),
        url::Host::Domain(d) if d.eq_ignore_ascii_case("localhost") => Some(d.to_owned()),
        _ => None,
    }
}

/// Fetches pages over HTTP(S) within [`FetchConfig`]'s limits.
#[derive(Clone)]
pub struct HttpFetcher {
    client: reqwest::Client,
    config: FetchConfig,
}

impl std::fmt::Debug for HttpFetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpFetcher")
            .field("config", &self.config)
            .finish()
    }
}

impl HttpFetcher {
    /// A fetcher with these limits.
    pub fn new(config: FetchConfig) -> Result<Self, crate::ModelError> {
        let (max, allow_private) = (config.max_redirects, config.allow_private);
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() > max {
                return attempt.error(TooManyRedirects);
            }
            if !allow_private {
                if let Some(ip) = literal_private(attempt.url()) {
                    return attempt.error(BlockedRedirect(ip));
                }
            }
            attempt.follow()
        });
        let mut builder = reqwest::Client::builder()
            .redirect(policy)
            .connect_timeout(Duration::from_millis(config.timeout_ms.min(10_000)))
            .user_agent(concat!(
                "ragscope/",
                env!("CARGO_PKG_VERSION"),
                " (+url source sync)"
            ));
        builder = match &config.proxy {
            Some(p) => builder.proxy(
                reqwest::Proxy::all(p)
                    .map_err(|e| crate::ModelError::Config(format!("sources proxy: {e}")))?,
            ),
            None => builder.no_proxy(),
        };
        if !config.allow_private {
            builder = builder.dns_resolver(Arc::new(PublicOnly));
        }
        let client = builder
            .build()
            .map_err(|e| crate::ModelError::Config(format!("HTTP client: {e}")))?;
        Ok(HttpFetcher { client, config })
    }

    /// The limits.
    pub fn config(&self) -> &FetchConfig {
        &self.config
    }

    fn classify(&self, e: reqwest::Error) -> FetchError {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(s) = source {
            if let Some(b) = s.downcast_ref::<Blocked>() {
                return FetchError::Blocked(b.0.clone());
            }
            if let Some(b) = s.downcast_ref::<BlockedRedirect>() {
                return FetchError::Blocked(b.0.clone());
            }
            if s.downcast_ref::<TooManyRedirects>().is_some() {
                return FetchError::Redirects {
                    limit: self.config.max_redirects,
                };
            }
            source = s.source();
        }
        if e.is_timeout() {
            FetchError::Timeout {
                ms: self.config.timeout_ms,
            }
        } else if e.is_redirect() {
            FetchError::Redirects {
                limit: self.config.max_redirects,
            }
        } else {
            // The URL may carry credentials; the error text of reqwest names the URL.
            FetchError::Network(e.without_url().to_string())
        }
    }

    async fn fetch_inner(&self, url: reqwest::Url) -> Result<FetchedPage, FetchError> {
        let mut res = self
            .client
            .get(url)
            .send()
            .await
            .map_err(|e| self.classify(e))?;
        let status = res.status();
        if !status.is_success() {
            return Err(FetchError::Status(status.as_u16()));
        }
        let limit = self.config.max_bytes;
        if res.content_length().is_some_and(|n| n > limit) {
            return Err(FetchError::TooLarge { limit });
        }
        let final_url = res.url().to_string();
        let content_type = res
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut body = Vec::new();
        while let Some(chunk) = res.chunk().await.map_err(|e| self.classify(e))? {
            if body.len() as u64 + chunk.len() as u64 > limit {
                return Err(FetchError::TooLarge { limit });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(FetchedPage {
            final_url,
            content_type,
            body,
        })
    }
}

#[async_trait]
impl Fetcher for HttpFetcher {
    async fn fetch(&self, url: &str) -> Result<FetchedPage, FetchError> {
        let parsed =
            reqwest::Url::parse(url).map_err(|e| FetchError::BadUrl(format!("{url}: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
            return Err(FetchError::BadUrl(format!(
                "{url}: only http and https URLs with a host are fetched"
            )));
        }
        if !self.config.allow_private {
            if let Some(ip) = literal_private(&parsed) {
                return Err(FetchError::Blocked(ip));
            }
        }
        match tokio::time::timeout(
            Duration::from_millis(self.config.timeout_ms),
            self.fetch_inner(parsed),
        )
        .await
        {
            Ok(r) => r,
            Err(_) => Err(FetchError::Timeout {
                ms: self.config.timeout_ms,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_addresses_are_recognised() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            // Every IPv6 form of a private or loopback IPv4 address.
            "::127.0.0.1",
            "::10.0.0.1",
            "::ffff:0:127.0.0.1",
            "64:ff9b::127.0.0.1",
            "64:ff9b::10.1.2.3",
            "64:ff9b:1::8.8.8.8",
            "2002:7f00:1::",
            "2002:c0a8:101::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "ff02::1",
            "2001:db8::1",
            "224.0.0.1",
            "240.0.0.1",
            "198.18.0.1",
            "192.0.0.8",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700::1111",
            "100.128.0.1",
            "::ffff:8.8.8.8",
            "64:ff9b::8.8.8.8",
            "2002:808:808::1",
        ] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[tokio::test]
    async fn loopback_is_refused_unless_allowed_and_bad_urls_are_clear() {
        let f = HttpFetcher::new(FetchConfig::default()).unwrap();
        assert!(matches!(
            f.fetch("http://127.0.0.1:9/x").await,
            Err(FetchError::Blocked(_))
        ));
        assert!(matches!(
            f.fetch("http://localhost:9/x").await,
            Err(FetchError::Blocked(_))
        ));
        assert!(matches!(
            f.fetch("http://[::1]:9/").await,
            Err(FetchError::Blocked(_))
        ));
        assert!(matches!(
            f.fetch("ftp://example.com/").await,
            Err(FetchError::BadUrl(_))
        ));
        assert!(matches!(
            f.fetch("not a url").await,
            Err(FetchError::BadUrl(_))
        ));
    }
}
