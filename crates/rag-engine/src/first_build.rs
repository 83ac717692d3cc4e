//! The first build of a knowledge base's indexes in a serving process.
//!
//! Without an index file, the first query of a large knowledge base would
//! wait for the whole build (about 20 s at 100,000 documents). A server
//! (`EngineConfig::first_build_wait`) runs that build once, in its own
//! task, and waits for it only so long: a small knowledge base is answered
//! as if nothing happened, a large one gets [`CoreError::IndexBuilding`]
//! (HTTP 503, code `index_building`) while the build goes on, and later
//! callers wait on the same build instead of starting another. Later
//! updates of an index that is in memory are not bounded: they touch only
//! what changed.

use crate::engine::{index_task_failed, Engine, KbIndex};
use futures::future::{BoxFuture, FutureExt, Shared};
use rag_core::{CoreError, KnowledgeBase, TenantId};
use std::sync::Arc;

/// A first build under way, shared by every caller waiting for it.
pub(crate) type FirstBuild = Shared<BoxFuture<'static, Result<Arc<KbIndex>, CoreError>>>;

impl Engine {
    /// The indexes of a knowledge base at its current commit. An index of
    /// an earlier commit is brought up to date with the store's change log
    /// (touching only what the writes touched); without one, or when the
    /// store cannot tell what changed, the indexes are built from a whole
    /// snapshot. Both run off the async runtime, under a lock of this
    /// knowledge base only: other knowledge bases' queries never wait.
    /// Queries already running keep the index they started with.
    ///
    /// With [`crate::EngineConfig::first_build_wait`] set, a caller that
    /// finds no index of this knowledge base in memory waits at most that
    /// long for the first one, then gets [`CoreError::IndexBuilding`].
    pub async fn index(
        &self,
        tenant: &TenantId,
        kb: &KnowledgeBase,
    ) -> Result<Arc<KbIndex>, CoreError> {
        let Some(wait) = self.inner.config.first_build_wait else {
            return self.index_now(tenant, kb).await;
        };
        if self.cached_any(kb.id).is_some() {
            return self.index_now(tenant, kb).await;
        }
        match tokio::time::timeout(wait, self.first_build(tenant, kb)).await {
            // Writes may have landed during the build: bring it up to date.
            Ok(Ok(_)) => self.index_now(tenant, kb).await,
            Ok(Err(e)) => Err(e),
            Err(_) => Err(CoreError::IndexBuilding {
                kb: kb.name.clone(),
            }),
        }
    }

    /// The first build of `kb`'s indexes: the one under way, or a new one
    /// in its own task (so it goes on when its callers stop waiting). A
    /// build that fails is forgotten, and the next caller starts another.
    fn first_build(&self, tenant: &TenantId, kb: &KnowledgeBase) -> FirstBuild {
        let mut builds = self
            .inner
            .first_builds
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(build) = builds.get(&kb.id) {
            return build.clone();
        }
        let (engine, tenant, owned) = (self.clone(), tenant.clone(), kb.clone());
        let task = tokio::spawn(async move {
            let out = engine.index_now(&tenant, &owned).await;
            engine
                .inner
                .first_builds
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&owned.id);
            out
        });
        let build = async move { task.await.map_err(index_task_failed)? }
            .boxed()
            .shared();
        builds.insert(kb.id, build.clone());
        build
    }
}
