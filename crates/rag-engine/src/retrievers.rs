//! The recall paths the pipeline runs: the in-memory lexical paths, dense
//! search over the in-memory vector index, and paths a store serves itself.

use crate::embed::CachedEmbedder;
use crate::engine::KbIndex;
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
}

/// The dense path: embeds the query (through the cache) and searches the
/// knowledge base's vectors on a blocking thread.
pub(crate) struct DenseRetriever {
    pub(crate) index: Arc<KbIndex>,
    pub(crate) embedder: CachedEmbedder,
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
        let expansions = if self.path == PathKind::Synonym {
            self.index.lexical.synonym_expansion(query)
        } else {
            None
        };
        let vector = if self.path == PathKind::Dense {
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
            Some(embedder.embed_query(&query.raw).await?)
        } else {
            None
        };
        let q = rag_core::StoreQuery {
            query,
            k,
            ctx,
            params: &self.params,
            expansions,
            vector: vector.as_deref(),
            dense_exact: self.index.vectors < self.hnsw_threshold,
        };
        self.recall
            .recall(&self.tenant, self.kb, self.path, q)
            .await
    }
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
        let vector = self.embedder.embed_query(&query.raw).await?;
        let (index, filter) = (
            self.index.clone(),
            Filter::new(&ctx.filters, ctx.now, &ctx.viewer),
        );
        tokio::task::spawn_blocking(move || {
            let dense = index
                .dense
                .as_ref()
                .and_then(|d| d.as_ref().ok())
                .expect("checked above");
            dense.search(&vector, k, &filter, &index.lexical)
        })
        .await
        .map_err(|e| CoreError::Component {
            component: "dense retriever".into(),
            message: e.to_string(),
        })?
        .map_err(|e| CoreError::Component {
            component: "dense retriever".into(),
            message: e.to_string(),
        })
    }
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
        let (index, path, params, query) = (
            self.index.clone(),
            self.path,
            self.params.clone(),
            query.clone(),
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
                PathKind::Dense => Err(UserError::PathUnavailable {
                    path: "dense".into(),
                    reason: "the dense path is not lexical".into(),
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
