//! URL sources: a start page and, optionally, the same-site pages it links
//! to (breadth first, to a depth and a page limit), fetched through the
//! [`Fetcher`] seam and ingested like files. A re-sync replaces only what
//! changed: a page whose bytes hash the same as its stored document is
//! skipped before extraction, so its chunks keep their vectors and nothing is
//! embedded; a changed page replaces its document atomically; a page that is
//! gone (404/410) or no longer linked loses its document; a page that fails
//! for a passing reason (timeout, 5xx, too large) keeps its last version.

use crate::embed::hex_sha256;
use crate::engine::Engine;
use crate::ingest::IngestStatus;
use crate::job::IngestOptions;
use rag_core::{
    CoreError, DocId, FetchError, Fetcher, PageOutcome, Source, SourceId, SourcePage, SourceStatus,
    TenantId, UserError, Viewer, WriteOp,
};
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

/// Caps on what a source may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceLimits {
    /// Deepest link depth a source may follow.
    pub max_depth: u32,
    /// Most pages a source may have.
    pub max_pages: u32,
}

impl Default for SourceLimits {
    fn default() -> Self {
        SourceLimits {
            max_depth: 3,
            max_pages: 200,
        }
    }
}

/// A URL source to add.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub struct NewSource {
    /// The start page (http or https).
    pub url: String,
    /// How many links deep to follow same-site links (default 0: the page only).
    pub depth: Option<u32>,
    /// At most this many pages per sync (default 50).
    pub max_pages: Option<u32>,
}

fn not_found(id: impl ToString) -> CoreError {
    UserError::NotFound {
        what: "source",
        id: id.to_string(),
    }
    .into()
}

fn invalid(reason: impl Into<String>) -> CoreError {
    UserError::InvalidParam {
        name: "source",
        reason: reason.into(),
    }
    .into()
}

/// The URL without its fragment: `page#a` and `page#b` are one page.
fn normalise(mut u: url::Url) -> url::Url {
    u.set_fragment(None);
    u
}

/// Same scheme, host and port as the start page.
fn same_site(a: &url::Url, b: &url::Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

fn looks_like_html(content_type: Option<&str>, body: &[u8]) -> bool {
    match content_type {
        Some(ct) => ct.to_ascii_lowercase().contains("html"),
        None => {
            let head = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
            head.contains("<html") || head.contains("<!doctype html")
        }
    }
}

impl Engine {
    /// The fetcher of URL sources, when one is configured.
    pub fn fetcher(&self) -> Option<Arc<dyn Fetcher>> {
        self.inner.components.fetcher.clone()
    }

    /// URL sources of a knowledge base that `viewer` may see.
    pub async fn sources(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        viewer: &Viewer,
    ) -> Result<Vec<Source>, CoreError> {
        let kb = self.kb(tenant, kb_name).await?;
        let mut all = self.store().sources(tenant, kb.id).await?;
        all.retain(|s| viewer.sees(s.owner.as_deref()));
        Ok(all)
    }

    /// One URL source.
    pub async fn source(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        id: SourceId,
        viewer: &Viewer,
    ) -> Result<Source, CoreError> {
        self.sources(tenant, kb_name, viewer)
            .await?
            .into_iter()
            .find(|s| s.id == id)
            .ok_or_else(|| not_found(id))
    }

    /// Adds a URL source (status pending; [`Engine::sync_source`] reads it).
    /// Its documents are restricted to `owner` when one is given.
    pub async fn add_source(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        new: NewSource,
        owner: Option<String>,
    ) -> Result<Source, CoreError> {
        let kb = self.kb(tenant, kb_name).await?;
        let limits = self.config().sources;
        let url = url::Url::parse(new.url.trim())
            .map_err(|e| invalid(format!("{:?} is not a URL: {e}", new.url)))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(invalid(
                "only http and https URLs with a host can be sources",
            ));
        }
        let depth = new.depth.unwrap_or(0);
        let max_pages = new.max_pages.unwrap_or(50);
        if depth > limits.max_depth {
            return Err(invalid(format!("depth is at most {}", limits.max_depth)));
        }
        if max_pages == 0 || max_pages > limits.max_pages {
            return Err(invalid(format!("max_pages is 1 to {}", limits.max_pages)));
        }
        let url = normalise(url).to_string();
        let existing = self.store().sources(tenant, kb.id).await?;
        if let Some(s) = existing.iter().find(|s| s.url == url && s.owner == owner) {
            return Err(invalid(format!(
                "{url} is already a source of this knowledge base (id {})",
                s.id
            )));
        }
        let source = Source {
            id: SourceId::generate(),
            kb: kb.id,
            url,
            depth,
            max_pages,
            owner,
            status: SourceStatus::Pending,
            reason: None,
            created_at: rag_core::now(),
            last_sync: None,
            pages: Vec::new(),
        };
        self.store()
            .apply(tenant, kb.id, vec![WriteOp::PutSource(source.clone())])
            .await?;
        Ok(source)
    }

    /// Deletes a URL source and the documents of its pages.
    pub async fn delete_source(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        id: SourceId,
        viewer: &Viewer,
    ) -> Result<(), CoreError> {
        let kb = self.kb(tenant, kb_name).await?;
        let source = self.source(tenant, kb_name, id, viewer).await?;
        // The documents of its pages, looked up by URL (an index of the
        // store), not found among every document of the knowledge base.
        let mut ops: Vec<WriteOp> = Vec::new();
        let urls: HashSet<&str> = source.pages.iter().map(|p| p.url.as_str()).collect();
        for url in urls {
            let docs = self
                .store()
                .document_by_source(tenant, kb.id, url, source.owner.as_deref())
                .await?;
            ops.extend(docs.into_iter().map(WriteOp::DeleteDocument));
        }
        ops.push(WriteOp::DeleteSource(id));
        self.store().apply(tenant, kb.id, ops).await?;
        Ok(())
    }

    /// Fetches a source's pages and brings its documents in step with them;
    /// `progress` sees each page as it is done. Returns the updated source.
    pub async fn sync_source(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        id: SourceId,
        viewer: &Viewer,
        progress: &mut (dyn FnMut(&SourcePage) + Send),
    ) -> Result<Source, CoreError> {
        let kb = self.kb(tenant, kb_name).await?;
        let mut source = self.source(tenant, kb_name, id, viewer).await?;
        let fetcher = self
            .fetcher()
            .ok_or_else(|| invalid("no fetcher is configured: URL sources cannot be read"))?;
        let root = url::Url::parse(&source.url).map_err(|e| invalid(format!("stored URL: {e}")))?;
        let owner = source.owner.clone();
        let options = IngestOptions {
            owner: source.owner.clone(),
            ..IngestOptions::new(self.config().chunk)
        };

        let mut queue: VecDeque<(url::Url, u32)> = VecDeque::from([(root.clone(), 0)]);
        let mut seen: HashSet<String> = HashSet::from([root.to_string()]);
        let mut pages: Vec<SourcePage> = Vec::new();
        let mut limited = false;
        let mut root_error: Option<String> = None;
        while let Some((url, depth)) = queue.pop_front() {
            if pages.len() as u32 >= source.max_pages {
                limited = true;
                break;
            }
            let url_s = url.to_string();
            let page = match fetcher.fetch(&url_s).await {
                Err(e) => {
                    if depth == 0 {
                        root_error = Some(e.to_string());
                    }
                    self.failed_page(tenant, kb.id, &url_s, depth, e, owner.as_deref())
                        .await?
                }
                Ok(fetched) => {
                    if depth < source.depth
                        && looks_like_html(fetched.content_type.as_deref(), &fetched.body)
                    {
                        let base =
                            url::Url::parse(&fetched.final_url).unwrap_or_else(|_| url.clone());
                        // The page is outside bytes: its links are parsed by
                        // the extractor (isolated in servers), not here.
                        let job = crate::ExtractJob {
                            name: url_s.clone(),
                            media_type: fetched.content_type.clone(),
                            bytes: fetched.body.clone(),
                            limits: self.ingest_limits(),
                        };
                        let links = match self.extractor().links(job).await {
                            Ok(links) => links,
                            Err(e) => {
                                tracing::warn!(url = %rag_core::redact::redact_url(&url_s), code = e.code, reason = %e.reason, "the page's links could not be read");
                                Vec::new()
                            }
                        };
                        for href in links {
                            let Ok(next) = base.join(&href) else { continue };
                            let next = normalise(next);
                            if same_site(&root, &next) && seen.insert(next.to_string()) {
                                queue.push_back((next, depth + 1));
                            }
                        }
                    }
                    let hash = hex_sha256(&fetched.body);
                    let options = IngestOptions {
                        media_type: fetched.content_type.clone(),
                        ..options.clone()
                    };
                    let outcome = self
                        .ingest_with(tenant, kb_name, &url_s, fetched.body, &options, &mut |_| {})
                        .await?;
                    let doc = self
                        .store()
                        .document_by_hash(tenant, kb.id, &hash, source.owner.as_deref())
                        .await?;
                    match outcome.status {
                        IngestStatus::Document { .. } | IngestStatus::Faqs { .. } => SourcePage {
                            url: url_s.clone(),
                            outcome: PageOutcome::Indexed,
                            reason: None,
                            doc,
                            depth,
                        },
                        IngestStatus::Skipped { .. } => SourcePage {
                            url: url_s.clone(),
                            outcome: PageOutcome::Unchanged,
                            reason: None,
                            doc,
                            depth,
                        },
                        IngestStatus::Failed { reason, .. } => {
                            let doc = self
                                .page_document(tenant, kb.id, &url_s, owner.as_deref())
                                .await?;
                            SourcePage {
                                url: url_s.clone(),
                                outcome: PageOutcome::Failed,
                                reason: Some(reason),
                                doc,
                                depth,
                            }
                        }
                    }
                }
            };
            progress(&page);
            pages.push(page);
        }
        // Pages of the last sync that were not reached this time are no longer
        // linked: their documents go (unless the page limit cut the crawl short).
        if !limited && root_error.is_none() {
            let reached: HashSet<String> = pages.iter().map(|p| p.url.clone()).collect();
            let mut ops = Vec::new();
            for old in source.pages.iter() {
                let url = &old.url;
                if reached.contains(url) || old.outcome == PageOutcome::Removed {
                    continue;
                }
                // A page that never had a document (it always failed) just drops out.
                let Some(doc) = self
                    .page_document(tenant, kb.id, url, owner.as_deref())
                    .await?
                else {
                    continue;
                };
                ops.push(WriteOp::DeleteDocument(doc));
                let page = SourcePage {
                    url: url.clone(),
                    outcome: PageOutcome::Removed,
                    reason: Some("no longer linked".into()),
                    doc: None,
                    depth: old.depth,
                };
                progress(&page);
                pages.push(page);
            }
            if !ops.is_empty() {
                self.store().apply(tenant, kb.id, ops).await?;
            }
        }
        source.status = if root_error.is_some() {
            SourceStatus::Failed
        } else {
            SourceStatus::Synced
        };
        source.reason = root_error.map(|e| format!("the start page could not be read: {e}"));
        source.last_sync = Some(rag_core::now());
        source.pages = pages;
        self.store()
            .apply(tenant, kb.id, vec![WriteOp::PutSource(source.clone())])
            .await?;
        Ok(source)
    }

    /// The document a source's page wrote: the one stored from `url` with
    /// the source's owner (only that: another page or file with the same
    /// content is not the source's to delete), the oldest if several.
    /// Looked up by the store's index on source, not among every document.
    async fn page_document(
        &self,
        tenant: &TenantId,
        kb: rag_core::KbId,
        url: &str,
        owner: Option<&str>,
    ) -> Result<Option<DocId>, CoreError> {
        Ok(self
            .store()
            .document_by_source(tenant, kb, url, owner)
            .await?
            .into_iter()
            .next())
    }

    /// The record of a page that could not be fetched: a page that is gone
    /// loses its document; any other failure keeps the last version.
    async fn failed_page(
        &self,
        tenant: &TenantId,
        kb: rag_core::KbId,
        url: &str,
        depth: u32,
        error: FetchError,
        owner: Option<&str>,
    ) -> Result<SourcePage, CoreError> {
        let doc = self.page_document(tenant, kb, url, owner).await?;
        if let (true, Some(d)) = (error.is_gone(), doc) {
            self.store()
                .apply(tenant, kb, vec![WriteOp::DeleteDocument(d)])
                .await?;
            return Ok(SourcePage {
                url: url.to_owned(),
                outcome: PageOutcome::Removed,
                reason: Some(error.to_string()),
                doc: None,
                depth,
            });
        }
        Ok(SourcePage {
            url: url.to_owned(),
            outcome: PageOutcome::Failed,
            reason: Some(error.to_string()),
            doc,
            depth,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_do_not_make_new_pages_and_only_the_same_site_is_followed() {
        let a = normalise(url::Url::parse("http://h.test:8080/docs/page#intro").unwrap());
        assert_eq!(a.as_str(), "http://h.test:8080/docs/page");
        let root = url::Url::parse("http://h.test:8080/").unwrap();
        assert!(same_site(&root, &a));
        assert!(!same_site(
            &root,
            &url::Url::parse("http://h.test:9090/").unwrap()
        ));
        assert!(!same_site(
            &root,
            &url::Url::parse("https://h.test:8080/").unwrap()
        ));
        assert!(!same_site(
            &root,
            &url::Url::parse("http://other.test:8080/").unwrap()
        ));
        assert!(looks_like_html(Some("text/html; charset=utf-8"), b""));
        assert!(looks_like_html(None, b"<!DOCTYPE html><html>"));
        assert!(!looks_like_html(Some("text/plain"), b"<html>"));
    }
}
