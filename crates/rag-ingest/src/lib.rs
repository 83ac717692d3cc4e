//! Ingestion core of ragscope (work in progress).
