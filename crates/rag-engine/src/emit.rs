//! Where the pipeline's events go. A channel send waits for room, so a slow
//! reader slows the run down instead of losing events: the stream arrives
//! whole, `done` included, or the reader went away and the run stops.

use rag_core::PipelineEvent;

/// The receiver of one run's events.
pub(crate) enum EventSink<'a> {
    /// A bounded channel to a streaming consumer (backpressure).
    Channel(tokio::sync::mpsc::Sender<PipelineEvent>),
    /// Collected in order.
    Collect(&'a mut Vec<PipelineEvent>),
    /// Handed to a callback as they come (evaluation, benchmarks).
    Callback(&'a mut (dyn FnMut(PipelineEvent) + Send)),
    /// Not wanted (internal runs such as the FAQ tool).
    Discard,
}

impl EventSink<'_> {
    /// Delivers one event, waiting while the channel is full. A closed
    /// channel (the consumer went away) drops the event; the run is
    /// cancelled by its caller.
    pub(crate) async fn emit(&mut self, event: PipelineEvent) {
        match self {
            EventSink::Channel(tx) => {
                let _ = tx.send(event).await;
            }
            EventSink::Collect(events) => events.push(event),
            EventSink::Callback(f) => f(event),
            EventSink::Discard => {}
        }
    }
}
