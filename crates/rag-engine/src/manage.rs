//! Reading and editing knowledge one item at a time: knowledge bases,
//! documents, FAQ entries, synonyms, dictionary words and facts, as the HTTP
//! API and the workbench need them. Every write is one atomic store write;
//! an FAQ entry's vector is recomputed in the same write when its question or
//! answer changes, and only then.

use crate::engine::Engine;
use crate::second::SecondSource;
use rag_core::{
    Chunk, CoreError, DocId, Document, DocumentInfo, DocumentPage, DocumentQuery, Fact, FactId,
    FaqEntry, FaqId, FaqPage, FaqQuery, FaqStatus, KbSettings, KnowledgeBase, PassageId,
    PassageKind, SynonymGroup, TenantId, Timestamp, UserError, UserWord, Viewer, WriteOp,
    MAX_PAGE_LIMIT,
};

/// A listing's page size: 1 to [`MAX_PAGE_LIMIT`], else `invalid_param`.
fn check_limit(limit: usize) -> Result<(), CoreError> {
    if (1..=MAX_PAGE_LIMIT).contains(&limit) {
        return Ok(());
    }
    Err(UserError::InvalidParam {
        name: "limit",
        reason: format!("must be from 1 to {MAX_PAGE_LIMIT}, not {limit}"),
    }
    .into())
}

/// A new FAQ entry.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NewFaq {
    /// The question.
    pub question: String,
    /// The answer.
    pub answer: String,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Where it came from.
    #[serde(default)]
    pub source_url: Option<String>,
    /// Review status (approved when absent).
    #[serde(default)]
    pub status: Option<FaqStatus>,
    /// Not searchable before.
    #[serde(default)]
    pub valid_from: Option<Timestamp>,
    /// Not searchable after.
    #[serde(default)]
    pub valid_until: Option<Timestamp>,
}

/// Changes to an FAQ entry; absent fields stay as they are.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FaqPatch {
    /// New question.
    #[serde(default)]
    pub question: Option<String>,
    /// New answer.
    #[serde(default)]
    pub answer: Option<String>,
    /// New tags.
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    /// New source URL.
    #[serde(default)]
    pub source_url: Option<String>,
}

/// The lexicon of a knowledge base.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Lexicon {
    /// Synonym groups.
    pub synonyms: Vec<SynonymGroup>,
    /// Segmenter words.
    pub user_words: Vec<UserWord>,
    /// Facts.
    pub facts: Vec<Fact>,
}

fn not_found(what: &'static str, id: impl ToString) -> CoreError {
    UserError::NotFound {
        what,
        id: id.to_string(),
    }
    .into()
}

fn check_text(name: &'static str, s: &str, max: usize) -> Result<(), CoreError> {
    if s.trim().is_empty() {
        return Err(UserError::InvalidParam {
            name,
            reason: "must not be empty".into(),
        }
        .into());
    }
    if s.len() > max {
        return Err(UserError::InvalidParam {
            name,
            reason: format!("is {} bytes long; the limit is {max}", s.len()),
        }
        .into());
    }
    Ok(())
}

/// Longest question or answer accepted through the API.
const MAX_FAQ_TEXT: usize = 64 * 1024;

impl Engine {
    /// Knowledge bases of a tenant.
    pub async fn list_kbs(&self, tenant: &TenantId) -> Result<Vec<KnowledgeBase>, CoreError> {
        self.store().list_kbs(tenant).await
    }

    /// Deletes a knowledge base and everything in it.
    pub async fn delete_kb(&self, tenant: &TenantId, name: &str) -> Result<(), CoreError> {
        let kb = self.kb(tenant, name).await?;
        self.store().delete_kb(tenant, kb.id).await?;
        self.forget_index(kb.id);
        Ok(())
    }

    /// Replaces a knowledge base's intents, keeping its other settings.
    pub async fn set_intents(
        &self,
        tenant: &TenantId,
        name: &str,
        intents: Vec<rag_core::Intent>,
    ) -> Result<KnowledgeBase, CoreError> {
        let kb = self.kb(tenant, name).await?;
        let settings = KbSettings {
            intents,
            ..kb.settings
        };
        self.update_kb_settings(tenant, name, settings).await
    }

    /// Replaces a knowledge base's settings.
    pub async fn update_kb_settings(
        &self,
        tenant: &TenantId,
        name: &str,
        settings: KbSettings,
    ) -> Result<KnowledgeBase, CoreError> {
        settings.retrieval.validate()?;
        settings.answer.validate()?;
        settings.drafts.validate()?;
        rag_core::validate_intents(&settings.intents)?;
        let kb = self.kb(tenant, name).await?;
        self.store()
            .apply(tenant, kb.id, vec![WriteOp::PutSettings(settings)])
            .await?;
        let kb = self.kb(tenant, name).await?;
        self.warm_intents(tenant, &kb);
        Ok(kb)
    }

    /// Documents of a knowledge base that `viewer` may see.
    pub async fn documents(
        &self,
        tenant: &TenantId,
        kb: &str,
        viewer: &Viewer,
    ) -> Result<Vec<DocumentInfo>, CoreError> {
        let kb = self.kb(tenant, kb).await?;
        let mut docs = self.store().documents(tenant, kb.id).await?;
        docs.retain(|d| viewer.sees(d.owner.as_deref()));
        Ok(docs)
    }

    /// One page of the documents `viewer` may see, in (`created_at`, `id`)
    /// order from `after` on, with how many there are in all. `limit` must
    /// be 1 to [`rag_core::MAX_PAGE_LIMIT`] (`invalid_param` otherwise).
    pub async fn documents_page(
        &self,
        tenant: &TenantId,
        kb: &str,
        query: &DocumentQuery,
    ) -> Result<DocumentPage, CoreError> {
        check_limit(query.limit)?;
        let kb = self.kb(tenant, kb).await?;
        self.store().documents_page(tenant, kb.id, query).await
    }

    /// A document with its chunks; another owner's restricted document is not found.
    pub async fn document(
        &self,
        tenant: &TenantId,
        kb: &str,
        doc: DocId,
        viewer: &Viewer,
    ) -> Result<(Document, Vec<Chunk>), CoreError> {
        let kb = self.kb(tenant, kb).await?;
        self.store()
            .document(tenant, kb.id, doc)
            .await?
            .filter(|(d, _)| viewer.sees(d.owner.as_deref()))
            .ok_or_else(|| not_found("document", doc))
    }

    /// Deletes a document with its chunks, vectors and index entries, and the
    /// FAQ entries drafted from it that nobody edited; edited drafts stay,
    /// unlinked from it.
    pub async fn delete_document(
        &self,
        tenant: &TenantId,
        kb: &str,
        doc: DocId,
        viewer: &Viewer,
    ) -> Result<(), CoreError> {
        let kb = self.kb(tenant, kb).await?;
        if !self
            .store()
            .document(tenant, kb.id, doc)
            .await?
            .is_some_and(|(d, _)| viewer.sees(d.owner.as_deref()))
        {
            return Err(not_found("document", doc));
        }
        self.store()
            .apply(tenant, kb.id, vec![WriteOp::DeleteDocument(doc)])
            .await?;
        Ok(())
    }

    /// FAQ entries of a knowledge base.
    pub async fn faqs(&self, tenant: &TenantId, kb: &str) -> Result<Vec<FaqEntry>, CoreError> {
        let kb = self.kb(tenant, kb).await?;
        self.store().faqs(tenant, kb.id).await
    }

    /// One page of the FAQ entries (of one status, when asked), in
    /// (`created_at`, `id`) order from `after` on, with how many there are
    /// in all. `limit` must be 1 to [`rag_core::MAX_PAGE_LIMIT`]
    /// (`invalid_param` otherwise).
    pub async fn faqs_page(
        &self,
        tenant: &TenantId,
        kb: &str,
        query: &FaqQuery,
    ) -> Result<FaqPage, CoreError> {
        check_limit(query.limit)?;
        let kb = self.kb(tenant, kb).await?;
        self.store().faqs_page(tenant, kb.id, query).await
    }

    /// Calls `f` with every FAQ entry of a knowledge base, a page at a time
    /// in (`created_at`, `id`) order, so that going through them holds one
    /// page whatever the knowledge base's size; an error of `f` stops.
    pub(crate) async fn each_faq_page(
        &self,
        tenant: &TenantId,
        kb: rag_core::KbId,
        mut f: impl FnMut(&[FaqEntry]) -> Result<(), CoreError>,
    ) -> Result<(), CoreError> {
        let mut query = FaqQuery {
            limit: MAX_PAGE_LIMIT,
            ..FaqQuery::default()
        };
        loop {
            let page = self.store().faqs_page(tenant, kb, &query).await?;
            f(&page.faqs)?;
            match page.next {
                Some(next) => query.after = Some(next),
                None => return Ok(()),
            }
        }
    }

    /// One FAQ entry, read by its id.
    pub async fn faq(&self, tenant: &TenantId, kb: &str, id: FaqId) -> Result<FaqEntry, CoreError> {
        let kb = self.kb(tenant, kb).await?;
        self.store()
            .faq(tenant, kb.id, id)
            .await?
            .ok_or_else(|| not_found("FAQ entry", id))
    }

    /// Creates an FAQ entry (embedded in the same write when an embedder is configured).
    pub async fn create_faq(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        new: NewFaq,
    ) -> Result<FaqEntry, CoreError> {
        check_text("question", &new.question, MAX_FAQ_TEXT)?;
        check_text("answer", &new.answer, MAX_FAQ_TEXT)?;
        let kb = self.kb(tenant, kb_name).await?;
        let ts = rag_core::now();
        let entry = FaqEntry {
            id: FaqId::generate(),
            kb: kb.id,
            question: new.question.trim().to_owned(),
            answer: new.answer.trim().to_owned(),
            status: new.status.unwrap_or_default(),
            edited: false,
            source_url: new.source_url,
            tags: new.tags,
            created_at: ts,
            updated_at: ts,
            valid_from: new.valid_from,
            valid_until: new.valid_until,
            source_doc: None,
        };
        let mut ops = vec![WriteOp::PutFaq(entry.clone())];
        let text = vec![(
            PassageId::Faq(entry.id),
            format!("{}: {}", entry.question, entry.answer),
        )];
        ops.extend(self.vectors_for(tenant, kb.id, text).await?);
        ops.extend(self.second_ops(&[SecondSource::faq(&entry)]).await?);
        self.store().apply(tenant, kb.id, ops).await?;
        Ok(entry)
    }

    /// Edits an FAQ entry: sets `edited` (an edited draft is never deleted
    /// by re-syncing its document); re-embeds only when the question or
    /// answer changed.
    pub async fn update_faq(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        id: FaqId,
        patch: FaqPatch,
    ) -> Result<FaqEntry, CoreError> {
        let kb = self.kb(tenant, kb_name).await?;
        let mut entry = self.faq(tenant, kb_name, id).await?;
        let before = (entry.question.clone(), entry.answer.clone());
        if let Some(q) = patch.question {
            check_text("question", &q, MAX_FAQ_TEXT)?;
            entry.question = q.trim().to_owned();
        }
        if let Some(a) = patch.answer {
            check_text("answer", &a, MAX_FAQ_TEXT)?;
            entry.answer = a.trim().to_owned();
        }
        if let Some(t) = patch.tags {
            entry.tags = t;
        }
        if let Some(u) = patch.source_url {
            entry.source_url = if u.is_empty() { None } else { Some(u) };
        }
        entry.edited = true;
        entry.updated_at = rag_core::now();
        let mut ops = vec![WriteOp::PutFaq(entry.clone())];
        if before != (entry.question.clone(), entry.answer.clone()) {
            let text = vec![(
                PassageId::Faq(entry.id),
                format!("{}: {}", entry.question, entry.answer),
            )];
            ops.extend(self.vectors_for(tenant, kb.id, text).await?);
            ops.extend(self.second_ops(&[SecondSource::faq(&entry)]).await?);
        }
        self.store().apply(tenant, kb.id, ops).await?;
        Ok(entry)
    }

    /// Approves, disables or sends an entry back to review. A status change
    /// is not an edit: an approved draft nobody edited is still replaced
    /// when its document is re-synced.
    pub async fn set_faq_status(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        id: FaqId,
        status: FaqStatus,
    ) -> Result<FaqEntry, CoreError> {
        let kb = self.kb(tenant, kb_name).await?;
        let mut entry = self.faq(tenant, kb_name, id).await?;
        entry.status = status;
        entry.updated_at = rag_core::now();
        self.store()
            .apply(tenant, kb.id, vec![WriteOp::PutFaq(entry.clone())])
            .await?;
        Ok(entry)
    }

    /// Deletes an FAQ entry and its vector.
    pub async fn delete_faq(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        id: FaqId,
    ) -> Result<(), CoreError> {
        let kb = self.kb(tenant, kb_name).await?;
        self.faq(tenant, kb_name, id).await?;
        self.store()
            .apply(tenant, kb.id, vec![WriteOp::DeleteFaq(id)])
            .await?;
        Ok(())
    }

    /// Synonyms, dictionary words and facts of a knowledge base.
    pub async fn lexicon(&self, tenant: &TenantId, kb_name: &str) -> Result<Lexicon, CoreError> {
        let kb = self.kb(tenant, kb_name).await?;
        let snapshot = self.store().lexicon_snapshot(tenant, kb.id).await?;
        let facts = snapshot
            .passages
            .iter()
            .filter(|p| p.kind() == PassageKind::Fact)
            .filter_map(|p| match p.id {
                PassageId::Fact(id) => Some(Fact {
                    id,
                    kb: kb.id,
                    key: p.title.clone(),
                    value: p.body.clone(),
                    key_synonyms: p.aliases.clone(),
                }),
                _ => None,
            })
            .collect();
        Ok(Lexicon {
            synonyms: snapshot.synonyms,
            user_words: snapshot.user_words,
            facts,
        })
    }

    /// Deletes a fact.
    pub async fn delete_fact(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        id: FactId,
    ) -> Result<(), CoreError> {
        let kb = self.kb(tenant, kb_name).await?;
        if !self
            .lexicon(tenant, kb_name)
            .await?
            .facts
            .iter()
            .any(|f| f.id == id)
        {
            return Err(not_found("fact", id));
        }
        self.store()
            .apply(tenant, kb.id, vec![WriteOp::DeleteFact(id)])
            .await?;
        Ok(())
    }

    /// The FAQ lookup tool for agents: approved FAQ hits for `query` as
    /// "Q: … A: … Source: …", or "No relevant FAQs found for: <query>".
    pub async fn faq_tool(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        query: &str,
        viewer: &Viewer,
    ) -> Result<String, CoreError> {
        let kb = self.kb(tenant, kb_name).await?;
        let request = rag_core::QueryRequest {
            kb: kb_name.to_owned(),
            query: query.to_owned(),
            params: None,
            overrides: Default::default(),
            filters: Default::default(),
            generate: false,
            conversation_id: None,
        };
        let options = crate::QueryOptions {
            views: true,
            log: false,
            viewer: viewer.clone(),
        };
        let mut sink = crate::emit::EventSink::Discard;
        let out = self.run_into(tenant, request, options, &mut sink).await?;
        let index = self.index(tenant, &kb).await?;
        let min = kb.settings.answer.min_fused.unwrap_or(0.0);
        let kept = out.reranked.iter().filter(|h| h.normalized >= min);
        let passages = self
            .passages_by_id((tenant, kb.id), &index, kept.clone().map(|h| h.id))
            .await?;
        let hits: Vec<rag_answer::FaqToolHit> = kept
            .filter_map(|h| passages.get(&h.id))
            .map(|p| index.lexical.view_of(p, &[]))
            .filter_map(|v| rag_answer::FaqToolHit::from_view(&v))
            .take(3)
            .collect();
        Ok(rag_answer::format_faq_tool(query, &hits))
    }
}
