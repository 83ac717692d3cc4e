//! The recall paths the pipeline runs: the in-memory lexical paths, dense
//! search over the in-memory vector index, and paths a store serves itself.

use crate::embed::CachedEmbedder;
use crate::engine::KbIndex;
use crate::feedback;
use crate::sentences::StoredSentences;
use async_trait::async_trait;
use rag_core::{
    AnalyzedQuery, CoreError, PathKind, RankedList, RetrievalParams, Retriever, SearchCtx,
    TenantId, UserError,
};
use rag_lexical::Filter;
use std::sync::Arc;

/// A lexical path of one index, as a [`Retriever`]. The work runs on a blocking thread.
pub(crate) struct LexicalRetriever {
    pub(crate) index: Arc<KbIndex>,
    pub(crate) path: PathKind,
    pub(crate) params: RetrievalParams,
    /// The translated path's dictionary.
    pub(crate) dictionary: Option<Arc<crate::Dictionary>>,
}

/// The dense path: embeds the query (through the cache) and searches the
/// knowledge base's vectors on a blocking thread.
pub(crate) struct DenseRetriever {
    pub(crate) index: Arc<KbIndex>,
    pub(crate) embedder: CachedEmbedder,
    /// Where its best candidates' sentence vectors are read (`None`: off).
    pub(crate) sentences: Option<StoredSentences>,
}

/// Why the dense path has nothing to search yet.
const NO_VECTORS: &str = "this knowledge base has no vectors yet; run `ragscope reembed --kb NAME`";

fn dense_unavailable(reason: impl Into<String>) -> CoreError {
    UserError::PathUnavailable {
        path: "dense".into(),
        reason: reason.into(),
    }
    .into()
}

/// Refuses to search vectors of one model with a query embedded by another.
fn same_space(
    space: &rag_core::EmbeddingSpace,
    embedder: &CachedEmbedder,
) -> Result<(), CoreError> {
    let model = embedder.model().model_id();
    if space.model_id != model {
        return Err(UserError::EmbeddingSpaceMismatch {
            stored_model: space.model_id.clone(),
            stored_dims: space.dims,
            configured_model: model.to_owned(),
            configured_dims: embedder.model().dimensions(),
        }
        .into());
    }
    Ok(())
}

/// A path the store runs itself (PostgreSQL). The engine still analyses the
/// query, matches synonym groups and embeds the query; the store scores.
pub(crate) struct StoreRetriever {
    pub(crate) recall: Arc<dyn rag_core::StoreRecall>,
    pub(crate) tenant: TenantId,
    pub(crate) kb: rag_core::KbId,
    pub(crate) index: Arc<KbIndex>,
    pub(crate) path: PathKind,
    pub(crate) params: RetrievalParams,
    pub(crate) embedder: Option<CachedEmbedder>,
    pub(crate) hnsw_threshold: usize,
    /// Where the dense path's best candidates' sentence vectors are read.
    pub(crate) sentences: Option<StoredSentences>,
    /// The translated path's dictionary.
    pub(crate) dictionary: Option<Arc<crate::Dictionary>>,
}

#[async_trait]
impl Retriever for StoreRetriever {
    fn path(&self) -> PathKind {
        self.path
    }

    async fn retrieve(
        &self,
        query: &AnalyzedQuery,
        k: usize,
        ctx: &SearchCtx,
    ) -> Result<RankedList, CoreError> {
        let expansions = match self.path {
            PathKind::Synonym => self.index.lexical.synonym_expansion(query),
            PathKind::Translated => {
                // The store scores the translations; the engine finds them.
                let (index, dictionary, q) =
                    (self.index.clone(), self.dictionary.clone(), query.clone());
                let terms = tokio::task::spawn_blocking(move || {
                    translation_dictionary(dictionary.as_deref())
                        .map(|d| index.lexical.translated_terms(d, &q))
                })
                .await
                .map_err(|e| CoreError::Component {
                    component: "translated retriever".into(),
                    message: e.to_string(),
                })?;
                match terms {
                    Ok(Some(t)) => Some(t),
                    Ok(None) | Err(_) => {
                        return Ok(RankedList {
                            path: PathKind::Translated,
                            hits: vec![],
                            notes: vec![terms.err().unwrap_or_else(|| {
                                "no word of the question has a dictionary translation".into()
                            })],
                        })
                    }
                }
            }
            _ => None,
        };
        let embedder = match self.path {
            PathKind::Dense => {
                let embedder = self
                    .embedder
                    .as_ref()
                    .ok_or_else(|| dense_unavailable("no embedder is configured"))?;
                let space = self
                    .index
                    .space
                    .as_ref()
                    .ok_or_else(|| dense_unavailable(NO_VECTORS))?;
                same_space(space, embedder)?;
                Some(embedder)
            }
            _ => None,
        };
        let vector = match embedder {
            Some(e) => Some(e.embed_query(&query.raw).await?),
            None => None,
        };
        // The dense path reads deeper when its best candidates are rescored
        // by their sentences.
        let (depth, rescoring) = match (&self.sentences, &vector) {
            (Some(s), Some(_)) => (StoredSentences::search_k(k, k), Some(s)),
            _ => (k, None),
        };
        let first = self
            .store_recall(query, depth, ctx, expansions.clone(), vector.as_deref())
            .await?;
        let (Some(embedder), Some(vector)) = (embedder, vector) else {
            return Ok(first);
        };
        let Some(faqs) = feedback::faq_matching(&first.hits) else {
            return match rescoring {
                Some(s) => s.rescore(first, &vector, k, k).await,
                None => Ok(first),
            };
        };
        // The same feedback as the in-memory path, with the neighbours'
        // vectors read from the store.
        let mixed = feedback::both_forms(&vector, &passage_form(embedder, &query.raw).await?);
        let nearest = self
            .store_recall(query, feedback::FEEDBACK_ENTRIES, ctx, None, Some(&mixed))
            .await?;
        let ids: Vec<rag_core::PassageId> = nearest.hits.iter().map(|h| h.id).collect();
        let stored = self.recall.vectors(&self.tenant, self.kb, &ids).await?;
        let neighbours: Vec<&[f32]> = ids
            .iter()
            .filter_map(|id| stored.iter().find(|(s, _)| s == id))
            .map(|(_, v)| v.as_slice())
            .collect();
        let moved = feedback::moved_towards(&mixed, &neighbours);
        let mut list = self
            .store_recall(query, depth, ctx, None, Some(&moved))
            .await?;
        list.notes.push(feedback_note(faqs, first.hits.len()));
        match rescoring {
            Some(s) => s.rescore(list, &moved, k, k).await,
            None => Ok(list),
        }
    }
}

impl crate::Engine {
    /// The retriever of a path the store runs, over `index` of `kb`.
    pub(crate) fn store_retriever(
        &self,
        recall: Arc<dyn rag_core::StoreRecall>,
        (tenant, kb): (&TenantId, rag_core::KbId),
        index: &Arc<KbIndex>,
        path: PathKind,
        params: &RetrievalParams,
    ) -> StoreRetriever {
        StoreRetriever {
            recall,
            tenant: tenant.clone(),
            kb,
            index: index.clone(),
            path,
            params: params.clone(),
            embedder: self.embedder(),
            hnsw_threshold: self.config().vectors.hnsw_threshold,
            sentences: self.stored_sentences(tenant, kb),
            dictionary: self.dictionary(),
        }
    }
}

impl StoreRetriever {
    async fn store_recall(
        &self,
        query: &AnalyzedQuery,
        k: usize,
        ctx: &SearchCtx,
        expansions: Option<(Vec<rag_core::QueryTerm>, Vec<String>)>,
        vector: Option<&[f32]>,
    ) -> Result<RankedList, CoreError> {
        let q = rag_core::StoreQuery {
            query,
            k,
            ctx,
            params: &self.params,
            expansions,
            vector,
            dense_exact: self.index.vectors < self.hnsw_threshold,
        };
        self.recall
            .recall(&self.tenant, self.kb, self.path, q)
            .await
    }
}

/// The question embedded as a passage (FAQ entries are embedded so).
async fn passage_form(embedder: &CachedEmbedder, question: &str) -> Result<Vec<f32>, CoreError> {
    let (mut v, _) = embedder.embed_documents(&[question.to_owned()], 1).await?;
    v.pop().ok_or_else(|| CoreError::Component {
        component: "embedder".into(),
        message: "no vector".into(),
    })
}

/// What the dense list says when feedback ran.
fn feedback_note(faqs: usize, hits: usize) -> String {
    format!(
        "{faqs} of the best {} candidates are FAQ entries: the question was embedded as a query and as a passage, moved towards its {} nearest entries (weight {}), and searched again",
        hits.min(feedback::FAQ_LOOK),
        feedback::FEEDBACK_ENTRIES,
        feedback::FEEDBACK_WEIGHT
    )
}

#[async_trait]
impl Retriever for DenseRetriever {
    fn path(&self) -> PathKind {
        PathKind::Dense
    }

    async fn retrieve(
        &self,
        query: &AnalyzedQuery,
        k: usize,
        ctx: &SearchCtx,
    ) -> Result<RankedList, CoreError> {
        let dense = match &self.index.dense {
            None => return Err(dense_unavailable(NO_VECTORS)),
            Some(Err(e)) => {
                return Err(dense_unavailable(format!(
                    "its vectors could not be loaded: {e}"
                )))
            }
            Some(Ok(d)) => d,
        };
        same_space(dense.space(), &self.embedder)?;
        let filter = Filter::new(&ctx.filters, ctx.now, &ctx.viewer);
        let sentences = self.sentences.as_ref().map(|s| (s, k));
        dense_list(
            &self.index,
            &self.embedder,
            &query.raw,
            k,
            filter,
            sentences,
        )
        .await
    }
}

/// The dense path's list for a question: its query vector searched; when
/// that finds FAQ entries ([`feedback::faq_matching`]), the question is
/// embedded as a passage too and moved towards its nearest entries, and
/// searched again (the list says so). Neighbours come from a search under
/// the same filter, so an entry the caller may not see never steers it.
/// With `sentences` (where to read them, and the depth the path runs at),
/// the best candidates are rescored by their sentence vectors
/// (`sentences.rs`); `k` may be deeper than that depth (why-not).
pub(crate) async fn dense_list(
    index: &Arc<KbIndex>,
    embedder: &CachedEmbedder,
    question: &str,
    k: usize,
    filter: Filter,
    sentences: Option<(&StoredSentences, usize)>,
) -> Result<RankedList, CoreError> {
    let searched = match sentences {
        Some((_, depth)) => StoredSentences::search_k(k, depth),
        None => k,
    };
    let (list, vector) = dense_search(index, embedder, question, searched, filter).await?;
    match sentences {
        Some((s, depth)) => s.rescore(list, &vector, depth, k).await,
        None => Ok(list),
    }
}

/// [`dense_list`] before rescoring: the list, and the vector searched.
async fn dense_search(
    index: &Arc<KbIndex>,
    embedder: &CachedEmbedder,
    question: &str,
    k: usize,
    filter: Filter,
) -> Result<(RankedList, Vec<f32>), CoreError> {
    // A knowledge base with FAQ entries may need the question's passage
    // form too: both are embedded at once (two blocking threads).
    let holds_faqs = matches!(&index.dense, Some(Ok(d)) if d.holds_faqs());
    let (vector, early) = if holds_faqs {
        let (q, p) = tokio::join!(
            embedder.embed_query(question),
            passage_form(embedder, question)
        );
        (q?, Some(p?))
    } else {
        (embedder.embed_query(question).await?, None)
    };
    let first = search_blocking(index, vector.clone(), k, &filter, None).await?;
    let Some(faqs) = feedback::faq_matching(&first.0.hits) else {
        return Ok(first);
    };
    let passage = match early {
        Some(p) => p,
        None => passage_form(embedder, question).await?,
    };
    let mixed = feedback::both_forms(&vector, &passage);
    let note = feedback_note(faqs, first.0.hits.len());
    search_blocking(index, mixed, k, &filter, Some(note)).await
}

/// One dense search on a blocking thread, and the vector searched. With
/// `feedback_note`, the vector is first moved towards its nearest entries
/// and the note is added.
async fn search_blocking(
    index: &Arc<KbIndex>,
    vector: Vec<f32>,
    k: usize,
    filter: &Filter,
    feedback_note: Option<String>,
) -> Result<(RankedList, Vec<f32>), CoreError> {
    let (index, filter) = (index.clone(), filter.clone());
    let failed = |message: String| CoreError::Component {
        component: "dense retriever".into(),
        message,
    };
    tokio::task::spawn_blocking(move || {
        let dense = match &index.dense {
            Some(Ok(d)) => d,
            _ => return Err(dense_unavailable(NO_VECTORS)),
        };
        let search = |v: &[f32], k: usize| {
            dense
                .search(v, k, &filter, &index.lexical)
                .map_err(|e| failed(e.to_string()))
        };
        let Some(note) = feedback_note else {
            return Ok((search(&vector, k)?, vector.clone()));
        };
        let nearest = search(&vector, feedback::FEEDBACK_ENTRIES)?;
        let neighbours: Vec<&[f32]> = nearest
            .hits
            .iter()
            .filter_map(|h| dense.vector_of(h.id))
            .collect();
        let moved = feedback::moved_towards(&vector, &neighbours);
        let mut list = search(&moved, k)?;
        list.notes.push(note);
        Ok((list, moved))
    })
    .await
    .map_err(|e| failed(e.to_string()))?
}

#[async_trait]
impl Retriever for LexicalRetriever {
    fn path(&self) -> PathKind {
        self.path
    }

    async fn retrieve(
        &self,
        query: &AnalyzedQuery,
        k: usize,
        ctx: &SearchCtx,
    ) -> Result<RankedList, CoreError> {
        let (index, path, params, query, dictionary) = (
            self.index.clone(),
            self.path,
            self.params.clone(),
            query.clone(),
            self.dictionary.clone(),
        );
        let filter = Filter::new(&ctx.filters, ctx.now, &ctx.viewer);
        tokio::task::spawn_blocking(move || {
            let index = &index.lexical;
            match path {
                PathKind::Bm25 => Ok(index.bm25(&query, k, &params.bm25, &filter)),
                PathKind::Substring => Ok(index.substring(&query, k, &filter)),
                PathKind::Fuzzy => {
                    Ok(index.fuzzy(&query, k, params.fuzzy_threshold, &params.bm25, &filter))
                }
                PathKind::Synonym => Ok(index.synonym(&query, k, &params.bm25, &filter)),
                PathKind::Fact => Ok(index.facts(&query, k)),
                PathKind::Translated => Ok(match translation_dictionary(dictionary.as_deref()) {
                    Ok(dict) => index.translated(dict, &query, k, &params.bm25, &filter),
                    Err(note) => RankedList {
                        path,
                        hits: vec![],
                        notes: vec![note],
                    },
                }),
                PathKind::Dense | PathKind::SecondDense => Err(UserError::PathUnavailable {
                    path: path.as_str().into(),
                    reason: "a dense path is not lexical".into(),
                }
                .into()),
            }
        })
        .await
        .map_err(|e| CoreError::Component {
            component: format!("{path} retriever"),
            message: e.to_string(),
        })?
    }
}

/// The translated path's dictionary, or the note of a path that has none.
/// Blocking (the first call may read the file).
pub(crate) fn translation_dictionary(
    dictionary: Option<&crate::Dictionary>,
) -> Result<&Arc<rag_text::Bilingual>, String> {
    let Some(d) = dictionary else {
        return Err(
            "no bilingual dictionary is configured (scripts/models/fetch-cedict.sh, then `dictionary.kind`)".into(),
        );
    };
    d.get()
        .map_err(|e| format!("the bilingual dictionary could not be read: {e}"))
}
