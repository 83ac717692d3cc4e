//! Index snapshots: every passage, vector and vocabulary entry of a
//! knowledge base, read in one transaction so it matches its commit sequence.

use crate::open::{owned, EmbeddedStore};
use crate::rows::{
    chunk_passage, fact_from_row, json_vec, read_faqs, sql, vector_from_row, CHUNK_PASSAGE_COLUMNS,
    FACT_COLUMNS,
};
use rag_core::{
    CoreError, EmbeddingSpace, KbId, KbSnapshot, Passage, SnapshotPart, SynonymGroup, TenantId,
    UserWord,
};
use rusqlite::Connection;
use std::sync::mpsc::SyncSender;

/// [`rag_core::StoreRead::snapshot`].
pub(crate) async fn snapshot(
    store: &EmbeddedStore,
    tenant: &TenantId,
    kb: KbId,
) -> Result<KbSnapshot, CoreError> {
    let tenant = tenant.clone();
    store
        .with_read(move |c| {
            // with_read is one read transaction: the snapshot is consistent with its seq.
            owned(c, &tenant, kb)?;
            load_snapshot(c, kb)
        })
        .await
}

/// [`rag_core::StoreRead::lexicon_snapshot`]: one read transaction.
pub(crate) async fn lexicon_snapshot(
    store: &EmbeddedStore,
    tenant: &TenantId,
    kb: KbId,
) -> Result<KbSnapshot, CoreError> {
    let tenant = tenant.clone();
    store
        .with_read(move |c| {
            owned(c, &tenant, kb)?;
            head(c, kb, false)
        })
        .await
}

/// [`rag_core::StoreRead::index_snapshot_streamed`]: one read transaction,
/// the chunks sent `batch` at a time as their rows are read.
pub(crate) async fn index_snapshot_streamed(
    store: &EmbeddedStore,
    tenant: &TenantId,
    kb: KbId,
    batch: usize,
    parts: SyncSender<SnapshotPart>,
) -> Result<usize, CoreError> {
    let tenant = tenant.clone();
    store
        .with_read(move |c| {
            owned(c, &tenant, kb)?;
            stream_snapshot(c, kb, batch.max(1), &parts)
        })
        .await
}

fn load_snapshot(conn: &Connection, kb: KbId) -> Result<KbSnapshot, CoreError> {
    let mut snapshot = head(conn, kb, true)?;
    let mut passages = Vec::new();
    each_chunk(conn, kb, |p| {
        passages.push(p);
        Ok(())
    })?;
    passages.extend(read_faqs(conn, kb)?.into_iter().map(Passage::from));
    passages.append(&mut snapshot.passages);
    snapshot.passages = passages;
    Ok(snapshot)
}

fn stream_snapshot(
    conn: &Connection,
    kb: KbId,
    batch: usize,
    parts: &SyncSender<SnapshotPart>,
) -> Result<usize, CoreError> {
    let send = |part: SnapshotPart| {
        parts
            .send(part)
            .map_err(|_| CoreError::Store("the snapshot's receiver is gone".into()))
    };
    let head = head(conn, kb, true)?;
    let vectors = head.vectors.len();
    send(SnapshotPart::Head(head))?;
    let mut part = Vec::with_capacity(batch);
    let mut sent = 0usize;
    let mut add = |p: Passage| {
        part.push(p);
        if part.len() >= batch {
            send(SnapshotPart::Passages(std::mem::replace(
                &mut part,
                Vec::with_capacity(batch),
            )))?;
            sent += 1;
            // A store failing half-way through the stream (after its third
            // part, so that a build has written segments by then).
            if sent == 3 && rag_core::failpoint::hit("store.snapshot.stream") {
                return Err(crate::StoreError::Failpoint("store.snapshot.stream").into());
            }
        }
        Ok(())
    };
    each_chunk(conn, kb, &mut add)?;
    for faq in read_faqs(conn, kb)? {
        add(Passage::from(faq))?;
    }
    if !part.is_empty() {
        send(SnapshotPart::Passages(part))?;
    }
    send(SnapshotPart::End)?;
    Ok(vectors)
}

/// A snapshot without its text passages: the commit, the facts (as
/// passages), the vectors (when asked for), the dictionary and the synonyms.
fn head(conn: &Connection, kb: KbId, with_vectors: bool) -> Result<KbSnapshot, CoreError> {
    let kb_s = kb.to_string();
    let seq: i64 = conn
        .query_row("SELECT seq FROM kbs WHERE id = ?1", [&kb_s], |r| r.get(0))
        .map_err(sql)?;
    let mut passages = Vec::new();
    let mut stmt = conn
        .prepare(&format!(
            "SELECT {FACT_COLUMNS} FROM facts WHERE kb_id = ?1 ORDER BY id"
        ))
        .map_err(sql)?;
    let mut rows = stmt.query([&kb_s]).map_err(sql)?;
    while let Some(r) = rows.next().map_err(sql)? {
        passages.push(Passage::from(fact_from_row(r, kb)?));
    }

    let mut vectors = Vec::new();
    if with_vectors {
        let mut stmt = conn
            .prepare(
                "SELECT passage, text_hash, vector FROM vectors WHERE kb_id = ?1 ORDER BY passage",
            )
            .map_err(sql)?;
        let mut rows = stmt.query([&kb_s]).map_err(sql)?;
        while let Some(r) = rows.next().map_err(sql)? {
            vectors.push(vector_from_row(r)?);
        }
    }
    Ok(KbSnapshot {
        seq: seq as u64,
        passages,
        synonyms: read_synonyms(conn, kb)?,
        user_words: read_user_words(conn, kb)?,
        space: read_space(conn, kb)?,
        vectors,
    })
}

/// Every chunk of a knowledge base as a passage, in document order.
fn each_chunk(
    conn: &Connection,
    kb: KbId,
    mut f: impl FnMut(Passage) -> Result<(), CoreError>,
) -> Result<(), CoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT {CHUNK_PASSAGE_COLUMNS}
             FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.kb_id = ?1 ORDER BY d.created_at, d.id, c.ordinal"
        ))
        .map_err(sql)?;
    let mut rows = stmt.query([kb.to_string()]).map_err(sql)?;
    while let Some(r) = rows.next().map_err(sql)? {
        f(chunk_passage(r)?)?;
    }
    Ok(())
}

/// The synonym groups of a knowledge base, in the order they were added.
pub(crate) fn read_synonyms(conn: &Connection, kb: KbId) -> Result<Vec<SynonymGroup>, CoreError> {
    let mut stmt = conn
        .prepare_cached("SELECT terms FROM synonyms WHERE kb_id = ?1 ORDER BY id")
        .map_err(sql)?;
    let mut rows = stmt.query([kb.to_string()]).map_err(sql)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(sql)? {
        let terms: String = r.get(0).map_err(sql)?;
        out.push(SynonymGroup {
            terms: json_vec(&terms, "synonyms", "terms")?,
        });
    }
    Ok(out)
}

/// The user dictionary of a knowledge base, by word.
pub(crate) fn read_user_words(conn: &Connection, kb: KbId) -> Result<Vec<UserWord>, CoreError> {
    let mut stmt = conn
        .prepare_cached("SELECT word, freq FROM user_words WHERE kb_id = ?1 ORDER BY word")
        .map_err(sql)?;
    let words = stmt
        .query_map([kb.to_string()], |r| {
            Ok(UserWord {
                word: r.get(0)?,
                freq: r.get(1)?,
            })
        })
        .map_err(sql)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(sql)?;
    Ok(words)
}

/// The embedding space of a knowledge base's vectors, if it has one.
pub(crate) fn read_space(conn: &Connection, kb: KbId) -> Result<Option<EmbeddingSpace>, CoreError> {
    let (model, dims): (Option<String>, Option<i64>) = conn
        .query_row(
            "SELECT embed_model, embed_dims FROM kbs WHERE id = ?1",
            [kb.to_string()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(sql)?;
    Ok(model.zip(dims).map(|(model_id, dims)| EmbeddingSpace {
        model_id,
        dims: dims as usize,
    }))
}
