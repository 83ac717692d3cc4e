//! FAQ entries drafted by the configured LLM from a document.
//!
//! [`Engine::draft_faqs`] sends the document (quoted, clipped to a budget) to
//! the LLM asking for a JSON object of question/answer pairs, checks the
//! reply with [`rag_answer::parse_drafts`], and stores the accepted pairs as
//! FAQ entries linked to the document (`source_doc`), with the status the
//! knowledge base's [`DraftSettings`](rag_core::DraftSettings) give. The same
//! atomic write deletes the document's earlier drafts that nobody edited;
//! edited drafts are human knowledge and are never deleted by drafting or by
//! re-syncing the document (see the ingest module, which moves them to the
//! new version).

use crate::blocking::blocking;
use crate::engine::Engine;
use futures::StreamExt;
use rag_core::{
    now, CoreError, DocId, Document, FaqEntry, FaqId, GenEvent, GenerateRequest, KnowledgeBase,
    PassageId, TenantId, UserError, Viewer, WriteOp,
};
use serde::Serialize;
use std::collections::HashSet;
use std::sync::Arc;

/// Characters of document text sent to the LLM.
pub const DRAFT_BUDGET_CHARS: usize = rag_answer::drafts::DEFAULT_DRAFT_BUDGET_CHARS;

/// What drafting did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DraftOutcome {
    /// The document drafted from.
    pub document: DocId,
    /// The entries stored.
    pub added: Vec<FaqEntry>,
    /// Why each other entry of the reply was left out.
    pub dropped: Vec<String>,
    /// Repairs made to read the reply (trailing commas, a bare array…).
    pub repairs: Vec<String>,
    /// Earlier unedited drafts of the document that the new ones replaced.
    pub replaced: usize,
    /// The language the pairs were asked for ("zh" or "en").
    pub language: rag_answer::AnswerLanguage,
    /// Whether only the beginning of a long document was sent.
    pub clipped: bool,
    /// The generator that answered.
    pub generator: String,
}

/// Why nothing was drafted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DraftFailure {
    /// No LLM is configured.
    #[error("drafting FAQ entries needs an LLM, and none is configured (set [llm] in the configuration)")]
    NoLlm,
    /// The document is restricted to an owner; FAQ entries carry no owner.
    #[error("document {doc} is restricted to an owner; FAQ entries are visible to the whole tenant, so drafts from it would reveal it")]
    Restricted {
        /// The document.
        doc: DocId,
    },
    /// The LLM (or the embedder storing the drafts' vectors) failed.
    #[error("{0}")]
    Provider(String),
    /// The LLM answered, but nothing usable.
    #[error("the LLM's drafts were rejected: {0}")]
    Rejected(#[from] rag_answer::DraftError),
    /// Anything else (unknown knowledge base or document, store failure).
    #[error(transparent)]
    Core(#[from] CoreError),
}

impl DraftFailure {
    /// A stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            DraftFailure::NoLlm => "no_llm",
            DraftFailure::Restricted { .. } => "restricted_document",
            DraftFailure::Provider(_) => "llm_failed",
            DraftFailure::Rejected(_) => "drafts_rejected",
            DraftFailure::Core(e) => crate::pipeline::error_code(e),
        }
    }
}

impl From<UserError> for DraftFailure {
    fn from(e: UserError) -> Self {
        DraftFailure::Core(e.into())
    }
}

/// Component errors (a provider's fault) become [`DraftFailure::Provider`].
fn provider(e: CoreError) -> DraftFailure {
    match e {
        CoreError::Component { .. } => DraftFailure::Provider(e.to_string()),
        other => DraftFailure::Core(other),
    }
}

impl Engine {
    /// Drafts FAQ entries from document `doc` with the configured LLM and
    /// stores them (see the module documentation). A document the viewer
    /// may not see is not found; a document restricted to an owner is
    /// refused, as FAQ entries are visible to the whole tenant.
    pub async fn draft_faqs(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        doc: DocId,
        viewer: &Viewer,
    ) -> Result<DraftOutcome, DraftFailure> {
        let kb = self.kb(tenant, kb_name).await?;
        let (document, _) = self
            .store()
            .document(tenant, kb.id, doc)
            .await?
            .filter(|(d, _)| viewer.sees(d.owner.as_deref()))
            .ok_or_else(|| UserError::NotFound {
                what: "document",
                id: doc.to_string(),
            })?;
        if document.owner.is_some() {
            return Err(DraftFailure::Restricted { doc });
        }
        let generator = self.generator().ok_or(DraftFailure::NoLlm)?;
        self.draft_document(tenant, &kb, document, generator).await
    }

    /// Drafts from a stored, unrestricted document.
    pub(crate) async fn draft_document(
        &self,
        tenant: &TenantId,
        kb: &KnowledgeBase,
        document: Document,
        generator: Arc<dyn rag_core::Generator>,
    ) -> Result<DraftOutcome, DraftFailure> {
        let settings = kb.settings.drafts.clone();
        settings.validate()?;
        let max_pairs = settings.max_pairs;
        let (title, text) = (document.title.clone(), document.text.clone());
        let prompt = blocking("drafts", move || {
            rag_answer::draft_prompt(&title, &text, max_pairs, DRAFT_BUDGET_CHARS)
        })
        .await?;
        let request = GenerateRequest {
            question: String::new(),
            sources: Vec::new(),
            messages: prompt.messages,
            json: true,
        };
        let mut stream = generator.generate(request).await.map_err(provider)?;
        let mut reply = String::new();
        while let Some(event) = stream.next().await {
            match event.map_err(provider)? {
                GenEvent::Delta(d) => reply.push_str(&d),
                GenEvent::Usage { .. } => {}
                GenEvent::Done => break,
            }
        }
        let parsed = blocking("drafts", move || {
            rag_answer::parse_drafts(&reply, max_pairs)
        })
        .await??;

        // What is there now: the drafts to replace, and which of the new
        // questions other entries already answer. The knowledge base's
        // entries are read a page at a time against the few drafted
        // questions' keys, so memory does not grow with the knowledge base.
        let drafted: HashSet<String> = parsed
            .pairs
            .iter()
            .map(|p| rag_answer::drafts::question_key(&p.question))
            .collect();
        let mut replaced = 0usize;
        let mut answered: HashSet<String> = HashSet::new();
        self.each_faq_page(tenant, kb.id, |page| {
            for f in page {
                if f.source_doc == Some(document.id) && !f.edited {
                    // A draft being replaced.
                    replaced += 1;
                    continue;
                }
                let key = rag_answer::drafts::question_key(&f.question);
                if drafted.contains(&key) {
                    answered.insert(key);
                }
            }
            Ok(())
        })
        .await?;
        let mut dropped = parsed.dropped;
        let ts = now();
        let mut added: Vec<FaqEntry> = Vec::new();
        for pair in parsed.pairs {
            if answered.contains(&rag_answer::drafts::question_key(&pair.question)) {
                dropped.push(format!(
                    "entry {}: the knowledge base already has this question",
                    pair.index
                ));
                continue;
            }
            added.push(FaqEntry {
                id: FaqId::generate(),
                kb: kb.id,
                question: pair.question,
                answer: pair.answer,
                status: settings.status,
                edited: false,
                source_url: Some(document.source.clone()),
                tags: Vec::new(),
                created_at: ts,
                updated_at: ts,
                valid_from: None,
                valid_until: None,
                source_doc: Some(document.id),
            });
        }
        if added.is_empty() {
            return Err(DraftFailure::Rejected(
                rag_answer::DraftError::NoValidEntry { dropped },
            ));
        }
        let mut ops = vec![WriteOp::DeleteUneditedDrafts(document.id)];
        ops.extend(added.iter().cloned().map(WriteOp::PutFaq));
        let texts = added
            .iter()
            .map(|f| {
                (
                    PassageId::Faq(f.id),
                    format!("{}: {}", f.question, f.answer),
                )
            })
            .collect();
        ops.extend(
            self.vectors_for(tenant, kb.id, texts)
                .await
                .map_err(provider)?,
        );
        let second: Vec<crate::second::SecondSource> =
            added.iter().map(crate::second::SecondSource::faq).collect();
        ops.extend(self.second_ops(&second).await.map_err(provider)?);
        let seq = self.store().apply(tenant, kb.id, ops).await?;
        tracing::info!(kb = %kb.name, doc = %document.id, added = added.len(), dropped = dropped.len(), replaced, seq, "FAQ entries drafted");
        Ok(DraftOutcome {
            document: document.id,
            added,
            dropped,
            repairs: parsed.repairs,
            replaced,
            language: prompt.language,
            clipped: prompt.clipped,
            generator: generator.name().to_owned(),
        })
    }
}
