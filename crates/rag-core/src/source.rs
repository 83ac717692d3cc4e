//! URL sources: a start page, optionally with the same-site pages it links to,
//! kept in step with the knowledge base by re-syncing; and the fetcher seam
//! that reads pages from the web.

use crate::ids::{DocId, KbId, SourceId};
use crate::model::Timestamp;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// Where a source stands.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceStatus {
    /// Added, not synced yet.
    Pending,
    /// The last sync reached the start page.
    Synced,
    /// The last sync could not read the start page (see `reason`).
    Failed,
}

impl SourceStatus {
    /// The stored text form.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceStatus::Pending => "pending",
            SourceStatus::Synced => "synced",
            SourceStatus::Failed => "failed",
        }
    }
    /// Parses the stored text form.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(SourceStatus::Pending),
            "synced" => Some(SourceStatus::Synced),
            "failed" => Some(SourceStatus::Failed),
            _ => None,
        }
    }
}

/// What happened to one page in the last sync.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PageOutcome {
    /// New or changed content was indexed.
    Indexed,
    /// The content had not changed: nothing was extracted or embedded.
    Unchanged,
    /// The page could not be read or ingested; an earlier version, if any, is kept.
    Failed,
    /// The page is gone (404/410) or no longer linked: its document was removed.
    Removed,
}

/// One page of a source.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourcePage {
    /// The page's URL (as linked, fragment removed).
    pub url: String,
    /// Its outcome in the last sync.
    pub outcome: PageOutcome,
    /// Why it failed or was removed.
    pub reason: Option<String>,
    /// The document holding its text, if any.
    pub doc: Option<DocId>,
    /// Link depth from the start page (0 for the start page).
    pub depth: u32,
}

/// A URL source of a knowledge base.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Source {
    /// Engine-assigned id.
    pub id: SourceId,
    /// Its knowledge base.
    pub kb: KbId,
    /// The start page.
    pub url: String,
    /// How many links deep to follow same-site links (0: the start page only).
    pub depth: u32,
    /// At most this many pages per sync.
    pub max_pages: u32,
    /// Documents of this source are restricted to this owner, if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Sync status.
    pub status: SourceStatus,
    /// Why the last sync failed.
    pub reason: Option<String>,
    /// When it was added.
    pub created_at: Timestamp,
    /// When the last sync finished.
    pub last_sync: Option<Timestamp>,
    /// The pages of the last sync.
    pub pages: Vec<SourcePage>,
}

/// A page as fetched.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchedPage {
    /// The URL the content came from, after redirects.
    pub final_url: String,
    /// The `Content-Type`, when sent.
    pub content_type: Option<String>,
    /// The body (within the fetcher's size limit).
    pub body: Vec<u8>,
}

/// Why a page could not be fetched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The URL is not an http(s) URL or cannot be parsed.
    #[error("not a fetchable URL: {0}")]
    BadUrl(String),
    /// The host resolves to a loopback, private or link-local address and
    /// such addresses are not allowed.
    #[error(
        "{0} is a private or loopback address; fetching it is not allowed (sources.allow_private)"
    )]
    Blocked(String),
    /// No complete answer in time.
    #[error("no complete answer within {ms} ms")]
    Timeout {
        /// The limit.
        ms: u64,
    },
    /// The body is larger than the limit.
    #[error("the page is larger than the {limit} byte limit")]
    TooLarge {
        /// The limit.
        limit: u64,
    },
    /// More redirects than allowed (or a redirect loop).
    #[error("more than {limit} redirects (a redirect loop?)")]
    Redirects {
        /// The limit.
        limit: usize,
    },
    /// The server answered with an error status.
    #[error("HTTP {0}")]
    Status(u16),
    /// Anything else on the way (DNS, connection, TLS).
    #[error("network error: {0}")]
    Network(String),
}

impl FetchError {
    /// Whether the page is gone for good (its document should go too), as
    /// opposed to a failure that may pass (its last version is kept).
    pub fn is_gone(&self) -> bool {
        matches!(self, FetchError::Status(404 | 410))
    }
}

/// Reads web pages for URL sources.
#[async_trait]
pub trait Fetcher: Send + Sync {
    /// Fetches one page, following redirects within the fetcher's limits.
    async fn fetch(&self, url: &str) -> Result<FetchedPage, FetchError>;
}
