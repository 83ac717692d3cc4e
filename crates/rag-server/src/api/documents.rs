//! Documents: list, read with chunks, delete, and the multipart upload that
//! streams each file's progress.

use super::SseEvent;
use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;
use axum::extract::{Multipart, Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::Json;
use futures::{Stream, StreamExt};
use rag_core::{Chunk, DocCursor, DocId, Document, DocumentInfo, DocumentQuery};
use serde::{Deserialize, Serialize};
use std::convert::Infallible;
use utoipa::{IntoParams, ToSchema};

/// Document metadata.
#[derive(Debug, Serialize, ToSchema)]
pub struct DocumentSummary {
    /// Id.
    pub id: DocId,
    /// Title.
    pub title: String,
    /// Source (file name or URL).
    pub source: String,
    /// sha256 of the source bytes.
    pub content_hash: String,
    /// Number of chunks.
    pub chunks: usize,
    /// The owner it is restricted to, if any.
    pub owner: Option<String>,
    /// When it was stored (unix seconds).
    pub created_at: i64,
}

impl From<DocumentInfo> for DocumentSummary {
    fn from(d: DocumentInfo) -> Self {
        DocumentSummary {
            id: d.id,
            title: d.title,
            // A page of a URL source stored before credentials were refused.
            source: crate::redact::redact_url(&d.source),
            content_hash: d.content_hash,
            chunks: d.chunks,
            owner: d.owner,
            created_at: d.created_at,
        }
    }
}

/// A document with its chunks.
#[derive(Debug, Serialize, ToSchema)]
pub struct DocumentWithChunks {
    /// The document with its extracted text.
    pub document: Document,
    /// Its chunks; offsets point into `document.text`.
    pub chunks: Vec<Chunk>,
}

fn parse_doc(id: &str) -> Result<DocId, ApiError> {
    DocId::parse(id).ok_or_else(|| ApiError::not_found(format!("document {id:?} not found")))
}

/// Which page of the documents listing.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DocumentsParams {
    /// Documents per page, 1 to 500 (default 50).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 500)]
    pub limit: Option<String>,
    /// The `next_cursor` of the previous page (absent: the first page).
    pub cursor: Option<String>,
    /// Only the documents stored from this source (file name or URL).
    pub source: Option<String>,
}

/// One page of the documents listing.
#[derive(Debug, Serialize, ToSchema)]
pub struct DocumentList {
    /// The documents, oldest first (by creation time, then id).
    pub documents: Vec<DocumentSummary>,
    /// Pass as `cursor` to get the next page; null on the last page.
    pub next_cursor: Option<String>,
    /// How many documents of the knowledge base the caller may see (the
    /// `source` filter aside).
    pub total: usize,
    /// The page size used.
    pub limit: usize,
}

impl DocumentsParams {
    /// The store's query for this caller, or 400 `invalid_param`.
    fn query(self, viewer: rag_core::Viewer) -> Result<DocumentQuery, ApiError> {
        let limit = super::paging::limit(self.limit.as_deref())?;
        let after = super::paging::cursor(self.cursor.as_deref(), DocCursor::decode)?;
        Ok(DocumentQuery {
            viewer,
            after,
            limit,
            source: self.source,
        })
    }
}

/// Documents of a knowledge base, a page at a time: follow `next_cursor`
/// until it is null. Each document present from the first page to the last
/// is listed exactly once, in order, whatever is added or deleted between
/// pages (documents added meanwhile come at the end).
#[utoipa::path(get, path = "/kbs/{kb}/documents", tag = "documents", params(("kb" = String, Path), DocumentsParams),
    responses((status = 200, body = DocumentList), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn list_documents(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    Query(params): Query<DocumentsParams>,
) -> Result<Json<DocumentList>, ApiError> {
    let query = params.query(caller.viewer())?;
    let page = state
        .engine
        .documents_page(&caller.tenant, &kb, &query)
        .await?;
    Ok(Json(DocumentList {
        documents: page.documents.into_iter().map(Into::into).collect(),
        next_cursor: page.next.map(|c| c.encode()),
        total: page.total,
        limit: query.limit,
    }))
}

/// A document with its text and chunk boundaries.
#[utoipa::path(get, path = "/kbs/{kb}/documents/{id}", tag = "documents", params(("kb" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = DocumentWithChunks), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn get_document(
    State(state): State<AppState>,
    caller: Caller,
    Path((kb, id)): Path<(String, String)>,
) -> Result<Json<DocumentWithChunks>, ApiError> {
    let (mut document, chunks) = state
        .engine
        .document(&caller.tenant, &kb, parse_doc(&id)?, &caller.viewer())
        .await?;
    document.source = crate::redact::redact_url(&document.source);
    Ok(Json(DocumentWithChunks { document, chunks }))
}

/// Deletes a document with its chunks, vectors and index entries.
#[utoipa::path(delete, path = "/kbs/{kb}/documents/{id}", tag = "documents", params(("kb" = String, Path), ("id" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn delete_document(
    State(state): State<AppState>,
    caller: Caller,
    Path((kb, id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    caller.require_write()?;
    state
        .engine
        .delete_document(&caller.tenant, &kb, parse_doc(&id)?, &caller.viewer())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A progress event of an upload.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "stage", rename_all = "snake_case")]
pub enum UploadEvent {
    /// A file arrived.
    Received {
        /// File name.
        file: String,
        /// Size in bytes.
        bytes: usize,
    },
    /// A file passed a stage: extracted (format, encoding, characters),
    /// chunked (chunks, largest in tokens), embedded (vectors, cached,
    /// computed) or drafted (FAQ entries drafted by the LLM for a knowledge
    /// base with `drafts.auto`: added, replaced, dropped, or the error).
    Stage {
        /// File name.
        file: String,
        /// Stage name.
        step: String,
        /// The stage's figures.
        detail: serde_json::Value,
    },
    /// A file was indexed.
    Indexed {
        /// File name.
        file: String,
        /// Chunks stored (documents).
        chunks: usize,
        /// FAQ entries added (tables).
        faqs_added: usize,
    },
    /// Nothing to do for the file.
    Skipped {
        /// File name.
        file: String,
        /// Why.
        reason: String,
    },
    /// The file was rejected; nothing of it was stored.
    Failed {
        /// File name.
        file: String,
        /// A stable snake_case code: the file's refusal (`parse_limit`,
        /// `parse_crash`, `no_text_layer`, `unsupported_format`,
        /// `too_large`, ...) or, when the upload itself failed, the error
        /// table's code (`store_error`, `embedding_space_mismatch`, ...).
        code: String,
        /// Why.
        reason: String,
    },
    /// All files were processed.
    Summary {
        /// Files received.
        files: usize,
        /// Files indexed.
        indexed: usize,
        /// Files skipped.
        skipped: usize,
        /// Files that failed.
        failed: usize,
    },
}

/// Uploads files (multipart, field name `file`, several allowed) and streams
/// progress per file as Server-Sent Events; one bad file does not stop the
/// others. Closing the connection stops the upload: the file being ingested
/// is abandoned (a file's writes are one commit: it is stored whole or not
/// at all) and later files are not read; files already indexed stay. A key
/// runs at most `max_concurrent_ingests_per_key` uploads and syncs at a time
/// (429 `too_many_ingests`).
/// A text field `owner` restricts the documents to that owner; documents
/// uploaded with a key issued for an owner are always restricted to it.
#[utoipa::path(post, path = "/kbs/{kb}/documents", tag = "documents", params(("kb" = String, Path)),
    request_body(content_type = "multipart/form-data", content = String),
    responses((status = 200, description = "Progress events (`data` is an UploadEvent)", content_type = "text/event-stream", body = SseEvent),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub(super) async fn upload(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    mut multipart: Multipart,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    caller.require_write()?;
    state.engine.kb(&caller.tenant, &kb).await?;
    // Taken before the body is read, held until the last file is done or
    // the client went away.
    let permit = state.ingest_slot(&caller.key_id)?;
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut owner_field: Option<String> = None;
    loop {
        let field = multipart.next_field().await.map_err(|e| {
            let status = e.status();
            let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
                "body_too_large"
            } else {
                "bad_multipart"
            };
            ApiError::new(status, code, e.body_text())
        })?;
        let Some(field) = field else { break };
        if field.name() == Some("owner") && field.file_name().is_none() {
            let text = field
                .text()
                .await
                .map_err(|e| ApiError::new(e.status(), "bad_multipart", e.body_text()))?;
            let text = text.trim().to_owned();
            if !text.is_empty() {
                owner_field = Some(text);
            }
            continue;
        }
        if files.len() >= state.config.limits.max_files_per_upload {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_many_files",
                format!(
                    "at most {} files per upload",
                    state.config.limits.max_files_per_upload
                ),
            ));
        }
        let name = field
            .file_name()
            .map(str::to_owned)
            .unwrap_or_else(|| format!("upload-{}", files.len() + 1));
        let bytes = field
            .bytes()
            .await
            .map_err(|e| ApiError::new(e.status(), "bad_multipart", e.body_text()))?;
        files.push((name, bytes.to_vec()));
    }
    if files.is_empty() {
        return Err(ApiError::bad_request(
            "no_files",
            "send at least one file in a multipart field",
        ));
    }
    let owner = crate::sources::owner_for(&caller, owner_field)?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<UploadEvent>();
    let (engine, tenant) = (state.engine.clone(), caller.tenant.clone());
    tokio::spawn(async move {
        let _held = permit;
        let (mut indexed, mut skipped, mut failed) = (0, 0, 0);
        let n = files.len();
        for (file, bytes) in files {
            if tx
                .send(UploadEvent::Received {
                    file: file.clone(),
                    bytes: bytes.len(),
                })
                .is_err()
            {
                return;
            }
            let (stage_tx, stage_file) = (tx.clone(), file.clone());
            let mut progress = move |p: rag_engine::IngestProgress| {
                let stage = p.stage();
                if matches!(stage, "extracted" | "chunked" | "embedded" | "drafted") {
                    let detail = serde_json::to_value(&p).unwrap_or_default();
                    let _ = stage_tx.send(UploadEvent::Stage {
                        file: stage_file.clone(),
                        step: stage.to_owned(),
                        detail,
                    });
                }
            };
            let options = rag_engine::IngestOptions {
                owner: owner.clone(),
                ..Default::default()
            };
            // The client closing the stream stops the upload: the running
            // ingest future is dropped (an isolated extraction's child
            // process is killed with it), and the files after it are not read.
            let ingest = engine.ingest_with(&tenant, &kb, &file, bytes, &options, &mut progress);
            let outcome = tokio::select! {
                outcome = ingest => outcome,
                () = tx.closed() => {
                    tracing::info!(file = %file, "upload: the client went away; ingest stopped");
                    return;
                }
            };
            let event = match outcome {
                Ok(o) => match o.status {
                    rag_engine::IngestStatus::Document { chunks, .. } => {
                        indexed += 1;
                        UploadEvent::Indexed {
                            file,
                            chunks,
                            faqs_added: 0,
                        }
                    }
                    rag_engine::IngestStatus::Faqs { added, .. } => {
                        indexed += 1;
                        UploadEvent::Indexed {
                            file,
                            chunks: 0,
                            faqs_added: added,
                        }
                    }
                    rag_engine::IngestStatus::Skipped { reason } => {
                        skipped += 1;
                        UploadEvent::Skipped { file, reason }
                    }
                    rag_engine::IngestStatus::Failed { code, reason } => {
                        failed += 1;
                        UploadEvent::Failed { file, code, reason }
                    }
                },
                Err(e) => {
                    failed += 1;
                    tracing::warn!(error = %e, "upload: file failed");
                    let error = crate::error::ApiError::from(e);
                    UploadEvent::Failed {
                        file,
                        code: error.code.to_owned(),
                        reason: error.message,
                    }
                }
            };
            if tx.send(event).is_err() {
                return;
            }
        }
        let _ = tx.send(UploadEvent::Summary {
            files: n,
            indexed,
            skipped,
            failed,
        });
    });
    let stream = tokio_stream::wrappers::UnboundedReceiverStream::new(rx).map(|e| {
        let kind = match &e {
            UploadEvent::Received { .. } => "received",
            UploadEvent::Stage { .. } => "stage",
            UploadEvent::Indexed { .. } => "indexed",
            UploadEvent::Skipped { .. } => "skipped",
            UploadEvent::Failed { .. } => "failed",
            UploadEvent::Summary { .. } => "summary",
        };
        Ok(Event::default()
            .event(kind)
            .data(serde_json::to_string(&e).unwrap_or_default()))
    });
    // Keep-alive comments during a long file also let the server notice a
    // client that went away.
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
