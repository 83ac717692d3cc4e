//! CPU work run off the async runtime, its failure to run (a panic)
//! reported as the failure of `component`.

use rag_core::CoreError;

/// Runs `f` on a blocking thread.
pub(crate) async fn blocking<T: Send + 'static>(
    component: &'static str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, CoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| CoreError::Component {
            component: component.into(),
            message: e.to_string(),
        })
}
