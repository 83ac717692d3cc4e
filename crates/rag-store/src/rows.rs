//! Rows and domain types: decoding stored values (ids, JSON columns,
//! vectors) and the rows shared by several reads.

use crate::error::StoreError;
use rag_core::{
    ChunkId, CoreError, DocId, Fact, FactId, FaqEntry, FaqId, FaqStatus, KbId, KnowledgeBase,
    Passage, PassageId, PassageVector, TenantId,
};
use rusqlite::{Connection, Row};

pub(crate) fn sql(e: rusqlite::Error) -> CoreError {
    StoreError::Sqlite(e).into()
}

pub(crate) fn json_vec(
    s: &str,
    table: &'static str,
    column: &'static str,
) -> Result<Vec<String>, CoreError> {
    serde_json::from_str(s).map_err(|e| {
        StoreError::Corrupt {
            table,
            column,
            detail: e.to_string(),
        }
        .into()
    })
}

pub(crate) fn parse_id<T>(
    s: &str,
    table: &'static str,
    parse: fn(&str) -> Option<T>,
) -> Result<T, CoreError> {
    parse(s).ok_or_else(|| {
        StoreError::Corrupt {
            table,
            column: "id",
            detail: format!("bad id {s:?}"),
        }
        .into()
    })
}

pub(crate) fn kb_from_row(
    r: &rusqlite::Row<'_>,
) -> rusqlite::Result<(String, String, String, i64, String)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
}

pub(crate) fn to_kb(
    (id, tenant, name, created_at, settings): (String, String, String, i64, String),
) -> Result<KnowledgeBase, CoreError> {
    Ok(KnowledgeBase {
        id: parse_id(&id, "kbs", KbId::parse)?,
        tenant: TenantId(tenant),
        name,
        created_at,
        settings: serde_json::from_str::<rag_core::KbSettings>(&settings)
            .map_err(|e| StoreError::Corrupt {
                table: "kbs",
                column: "settings",
                detail: e.to_string(),
            })?
            .upgraded(),
    })
}

/// Little-endian f32 bytes.
pub(crate) fn vector_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The inverse of [`vector_bytes`].
pub(crate) fn vector_from_bytes(b: &[u8]) -> Option<Vec<f32>> {
    b.len().is_multiple_of(4).then(|| {
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    })
}

/// The columns [`chunk_passage`] decodes, of `chunks c JOIN documents d ON d.id = c.doc_id`.
pub(crate) const CHUNK_PASSAGE_COLUMNS: &str = "c.id, c.doc_id, d.title, c.heading_path, c.text, d.tags, d.source, c.start_byte, c.end_byte, d.created_at, d.owner";

/// A chunk's passage from a row of [`CHUNK_PASSAGE_COLUMNS`]: the title field
/// carries the document title and the headings above the chunk.
pub(crate) fn chunk_passage(r: &Row<'_>) -> Result<Passage, CoreError> {
    let id: String = r.get(0).map_err(sql)?;
    let doc: String = r.get(1).map_err(sql)?;
    let title: String = r.get(2).map_err(sql)?;
    let headings: String = r.get(3).map_err(sql)?;
    let tags: String = r.get(5).map_err(sql)?;
    let headings = json_vec(&headings, "chunks", "heading_path")?;
    Ok(Passage {
        id: PassageId::Chunk(parse_id(&id, "chunks", ChunkId::parse)?),
        title: rag_core::chunk_title(&title, &headings),
        body: r.get(4).map_err(sql)?,
        tags: json_vec(&tags, "documents", "tags")?,
        aliases: Vec::new(),
        doc: Some(parse_id(&doc, "documents", DocId::parse)?),
        source: Some(r.get(6).map_err(sql)?),
        span: Some((
            r.get::<_, i64>(7).map_err(sql)? as usize,
            r.get::<_, i64>(8).map_err(sql)? as usize,
        )),
        created_at: r.get(9).map_err(sql)?,
        valid_from: None,
        valid_until: None,
        searchable: true,
        owner: r.get(10).map_err(sql)?,
    })
}

/// The columns [`fact_from_row`] decodes, of `facts`.
pub(crate) const FACT_COLUMNS: &str = "id, key, value, key_synonyms";

/// A fact from a row of [`FACT_COLUMNS`].
pub(crate) fn fact_from_row(r: &Row<'_>, kb: KbId) -> Result<Fact, CoreError> {
    let id: String = r.get(0).map_err(sql)?;
    let syn: String = r.get(3).map_err(sql)?;
    Ok(Fact {
        id: parse_id(&id, "facts", FactId::parse)?,
        kb,
        key: r.get(1).map_err(sql)?,
        value: r.get(2).map_err(sql)?,
        key_synonyms: json_vec(&syn, "facts", "key_synonyms")?,
    })
}

/// A stored vector from a row of `passage, text_hash, vector` of `vectors`.
pub(crate) fn vector_from_row(r: &Row<'_>) -> Result<PassageVector, CoreError> {
    let passage: String = r.get(0).map_err(sql)?;
    let bytes: Vec<u8> = r.get(2).map_err(sql)?;
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
    Ok(PassageVector {
        id,
        text_hash: r.get(1).map_err(sql)?,
        vector,
    })
}

/// The columns [`faq_from_row`] decodes, of `faqs`.
pub(crate) const FAQ_COLUMNS: &str = "id, question, answer, status, edited, source_url, tags, created_at, updated_at, valid_from, valid_until, source_doc";

/// An FAQ entry from a row of [`FAQ_COLUMNS`].
pub(crate) fn faq_from_row(r: &Row<'_>, kb: KbId) -> Result<FaqEntry, CoreError> {
    let id: String = r.get(0).map_err(sql)?;
    let status: String = r.get(3).map_err(sql)?;
    let tags: String = r.get(6).map_err(sql)?;
    let source_doc: Option<String> = r.get(11).map_err(sql)?;
    Ok(FaqEntry {
        id: parse_id(&id, "faqs", FaqId::parse)?,
        kb,
        question: r.get(1).map_err(sql)?,
        answer: r.get(2).map_err(sql)?,
        status: FaqStatus::parse(&status).ok_or(StoreError::Corrupt {
            table: "faqs",
            column: "status",
            detail: status.clone(),
        })?,
        edited: r.get(4).map_err(sql)?,
        source_url: r.get(5).map_err(sql)?,
        tags: json_vec(&tags, "faqs", "tags")?,
        created_at: r.get(7).map_err(sql)?,
        updated_at: r.get(8).map_err(sql)?,
        valid_from: r.get(9).map_err(sql)?,
        valid_until: r.get(10).map_err(sql)?,
        source_doc: source_doc
            .map(|d| parse_id(&d, "faqs", DocId::parse))
            .transpose()?,
    })
}

/// Every FAQ entry of a knowledge base, oldest first.
pub(crate) fn read_faqs(conn: &Connection, kb: KbId) -> Result<Vec<FaqEntry>, CoreError> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {FAQ_COLUMNS} FROM faqs WHERE kb_id = ?1 ORDER BY created_at, id"
        ))
        .map_err(sql)?;
    let mut rows = stmt.query([kb.to_string()]).map_err(sql)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(sql)? {
        out.push(faq_from_row(r, kb)?);
    }
    Ok(out)
}
