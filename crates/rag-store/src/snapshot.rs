//! Index snapshots: every passage, vector and vocabulary entry of a
//! knowledge base, read in one transaction so it matches its commit sequence.

use crate::error::StoreError;
use crate::open::{owned, EmbeddedStore};
use crate::rows::{json_vec, parse_id, read_faqs, sql, vector_from_bytes};
use rag_core::{
    ChunkId, CoreError, DocId, EmbeddingSpace, FactId, KbId, KbSnapshot, Passage, PassageId,
    PassageVector, SynonymGroup, TenantId, UserWord,
};
use rusqlite::Connection;

/// [`rag_core::StoreRead::snapshot`].
pub(crate) async fn snapshot(
    store: &EmbeddedStore,
    tenant: &TenantId,
    kb: KbId,
) -> Result<KbSnapshot, CoreError> {
    let tenant = tenant.clone();
    store
        .with_conn(move |c| {
            // One read transaction: the snapshot is consistent with its seq.
            let tx = c.transaction().map_err(sql)?;
            owned(&tx, &tenant, kb)?;
            let snap = load_snapshot(&tx, kb)?;
            tx.finish().map_err(sql)?;
            Ok(snap)
        })
        .await
}

fn load_snapshot(conn: &Connection, kb: KbId) -> Result<KbSnapshot, CoreError> {
    let kb_s = kb.to_string();
    let seq: i64 = conn
        .query_row("SELECT seq FROM kbs WHERE id = ?1", [&kb_s], |r| r.get(0))
        .map_err(sql)?;
    let mut passages = Vec::new();

    let mut stmt = conn
        .prepare(
            "SELECT c.id, c.doc_id, d.title, c.heading_path, c.text, d.tags, d.source, c.start_byte, c.end_byte, d.created_at, d.owner
             FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.kb_id = ?1 ORDER BY d.created_at, d.id, c.ordinal",
        )
        .map_err(sql)?;
    let rows = stmt
        .query_map([&kb_s], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, String>(6)?,
                r.get::<_, i64>(7)?,
                r.get::<_, i64>(8)?,
                r.get::<_, i64>(9)?,
                r.get::<_, Option<String>>(10)?,
            ))
        })
        .map_err(sql)?;
    for row in rows {
        let (id, doc, title, headings, text, tags, source, start, end, created_at, owner) =
            row.map_err(sql)?;
        let headings = json_vec(&headings, "chunks", "heading_path")?;
        // The title field carries the document title and the headings above the chunk.
        let full_title = rag_core::chunk_title(&title, &headings);
        passages.push(Passage {
            id: PassageId::Chunk(parse_id(&id, "chunks", ChunkId::parse)?),
            title: full_title,
            body: text,
            tags: json_vec(&tags, "documents", "tags")?,
            aliases: Vec::new(),
            doc: Some(parse_id(&doc, "documents", DocId::parse)?),
            source: Some(source),
            span: Some((start as usize, end as usize)),
            created_at,
            valid_from: None,
            valid_until: None,
            searchable: true,
            owner,
        });
    }

    passages.extend(read_faqs(conn, kb)?.into_iter().map(Passage::from));

    let mut stmt = conn
        .prepare("SELECT id, key, value, key_synonyms FROM facts WHERE kb_id = ?1 ORDER BY id")
        .map_err(sql)?;
    let rows = stmt
        .query_map([&kb_s], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
            ))
        })
        .map_err(sql)?;
    for row in rows {
        let (id, key, value, syn) = row.map_err(sql)?;
        let key_synonyms = json_vec(&syn, "facts", "key_synonyms")?;
        passages.push(Passage::from(rag_core::Fact {
            id: parse_id(&id, "facts", FactId::parse)?,
            kb,
            key,
            value,
            key_synonyms,
        }));
    }

    let mut stmt = conn
        .prepare("SELECT terms FROM synonyms WHERE kb_id = ?1 ORDER BY id")
        .map_err(sql)?;
    let synonyms = stmt
        .query_map([&kb_s], |r| r.get::<_, String>(0))
        .map_err(sql)?
        .map(|r| {
            r.map_err(sql).and_then(|t| {
                Ok(SynonymGroup {
                    terms: json_vec(&t, "synonyms", "terms")?,
                })
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut stmt = conn
        .prepare("SELECT word, freq FROM user_words WHERE kb_id = ?1 ORDER BY word")
        .map_err(sql)?;
    let user_words = stmt
        .query_map([&kb_s], |r| {
            Ok(UserWord {
                word: r.get(0)?,
                freq: r.get(1)?,
            })
        })
        .map_err(sql)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(sql)?;
    let (model, dims): (Option<String>, Option<i64>) = conn
        .query_row(
            "SELECT embed_model, embed_dims FROM kbs WHERE id = ?1",
            [&kb_s],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(sql)?;
    let space = model.zip(dims).map(|(model_id, dims)| EmbeddingSpace {
        model_id,
        dims: dims as usize,
    });
    let mut stmt = conn
        .prepare("SELECT passage, text_hash, vector FROM vectors WHERE kb_id = ?1 ORDER BY passage")
        .map_err(sql)?;
    let rows = stmt
        .query_map([&kb_s], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Vec<u8>>(2)?,
            ))
        })
        .map_err(sql)?;
    let mut vectors = Vec::new();
    for row in rows {
        let (passage, text_hash, bytes) = row.map_err(sql)?;
        let id = PassageId::parse(&passage).ok_or_else(|| StoreError::Corrupt {
            table: "vectors",
            column: "passage",
            detail: passage.clone(),
        })?;
        let vector = vector_from_bytes(&bytes).ok_or_else(|| StoreError::Corrupt {
            table: "vectors",
            column: "vector",
            detail: format!("{} bytes", bytes.len()),
        })?;
        vectors.push(PassageVector {
            id,
            text_hash,
            vector,
        });
    }
    Ok(KbSnapshot {
        seq: seq as u64,
        passages,
        synonyms,
        user_words,
        space,
        vectors,
    })
}
