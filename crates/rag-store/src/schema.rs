//! The on-disk schema and its format versions.

/// Bumped whenever the schema changes incompatibly; older data is migrated,
/// newer data refused.
pub const FORMAT_VERSION: u32 = 4;

pub(crate) const SCHEMA_V1: &str = r#"
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS kbs (
    id         TEXT PRIMARY KEY,
    tenant     TEXT NOT NULL,
    name       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    settings   TEXT NOT NULL,
    seq        INTEGER NOT NULL DEFAULT 0,
    -- The embedding space of the stored vectors (NULL until the first vector).
    embed_model TEXT,
    embed_dims  INTEGER,
    UNIQUE (tenant, name)
);
CREATE TABLE IF NOT EXISTS documents (
    id           TEXT PRIMARY KEY,
    kb_id        TEXT NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,
    title        TEXT NOT NULL,
    source       TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    tags         TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    text         TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS documents_by_hash ON documents (kb_id, content_hash);
CREATE TABLE IF NOT EXISTS chunks (
    id           TEXT PRIMARY KEY,
    doc_id       TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    kb_id        TEXT NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,
    ordinal      INTEGER NOT NULL,
    heading_path TEXT NOT NULL,
    text         TEXT NOT NULL,
    start_byte   INTEGER NOT NULL,
    end_byte     INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_by_kb ON chunks (kb_id, doc_id, ordinal);
-- Per-document reads (chunk counts of the documents listing, a document's
-- chunks, deletes by document): without it each is a scan of every chunk.
CREATE INDEX IF NOT EXISTS chunks_by_doc ON chunks (doc_id, ordinal);
CREATE TABLE IF NOT EXISTS faqs (
    id          TEXT PRIMARY KEY,
    kb_id       TEXT NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,
    question    TEXT NOT NULL,
    answer      TEXT NOT NULL,
    status      TEXT NOT NULL,
    edited      INTEGER NOT NULL,
    source_url  TEXT,
    tags        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    valid_from  INTEGER,
    valid_until INTEGER
);
CREATE INDEX IF NOT EXISTS faqs_by_kb ON faqs (kb_id);
CREATE TABLE IF NOT EXISTS facts (
    id           TEXT PRIMARY KEY,
    kb_id        TEXT NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,
    key          TEXT NOT NULL,
    value        TEXT NOT NULL,
    key_synonyms TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS facts_by_kb ON facts (kb_id);
CREATE TABLE IF NOT EXISTS synonyms (
    id    INTEGER PRIMARY KEY AUTOINCREMENT,
    kb_id TEXT NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,
    terms TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS vectors (
    passage   TEXT PRIMARY KEY,
    kb_id     TEXT NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,
    text_hash TEXT NOT NULL,
    vector    BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS vectors_by_kb ON vectors (kb_id);
CREATE TABLE IF NOT EXISTS user_words (
    kb_id TEXT NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,
    word  TEXT NOT NULL,
    freq  INTEGER,
    PRIMARY KEY (kb_id, word)
);
"#;

/// Format 2 adds tenants, API keys and the query log (format 1 data is
/// migrated by creating them).
pub(crate) const SCHEMA_V2: &str = r#"
CREATE TABLE IF NOT EXISTS tenants (
    name       TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS api_keys (
    id         TEXT PRIMARY KEY,
    hash       TEXT NOT NULL UNIQUE,
    tenant     TEXT NOT NULL,
    role       TEXT NOT NULL,
    owner      TEXT,
    label      TEXT NOT NULL,
    prefix     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    revoked    INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS query_log (
    id         TEXT PRIMARY KEY,
    tenant     TEXT NOT NULL,
    kb_id      TEXT NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL,
    query      TEXT NOT NULL,
    conversation TEXT,
    kb_miss    INTEGER NOT NULL DEFAULT 0,
    feedback   TEXT,
    record     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS query_log_by_kb ON query_log (kb_id, created_at);
CREATE INDEX IF NOT EXISTS query_log_by_conversation ON query_log (tenant, conversation, created_at);
"#;

/// Format 3 adds owners: documents restricted to an owner, and query-log rows
/// written through an owner's key; the document an FAQ entry was drafted
/// from by an LLM (`faqs.source_doc`, NULL for entries people wrote); and a
/// knowledge-base scope on API keys. Columns added to existing tables (SQLite
/// has no `ADD COLUMN IF NOT EXISTS`; the migration checks first).
pub(crate) const V3_COLUMNS: &[(&str, &str, &str)] = &[
    ("documents", "owner", "TEXT"),
    ("query_log", "owner", "TEXT"),
    ("api_keys", "kb", "TEXT"),
    ("faqs", "source_doc", "TEXT"),
];

/// Format 3 also adds URL sources (their pages' documents live in `documents`).
pub(crate) const SCHEMA_V3: &str = r#"
CREATE TABLE IF NOT EXISTS sources (
    id         TEXT PRIMARY KEY,
    kb_id      TEXT NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,
    url        TEXT NOT NULL,
    depth      INTEGER NOT NULL,
    max_pages  INTEGER NOT NULL,
    owner      TEXT,
    status     TEXT NOT NULL,
    reason     TEXT,
    created_at INTEGER NOT NULL,
    last_sync  INTEGER,
    pages      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS sources_by_kb ON sources (kb_id);
"#;

/// Format 4 adds the change log: per knowledge base and commit, what the
/// commit touched (`what` 0: a passage written or deleted, by its id; 1: a
/// passage's vector written; 2: the synonyms; 3: the user dictionary; 4:
/// every vector cleared or the embedding space fixed; `passage` is '' for
/// 2–4), written in the commit's transaction and pruned to the last commits
/// (`kbs.log_from`: the log holds every commit after it). Also indexes for
/// the per-knowledge-base reads that scanned or sorted: synonyms, FAQ
/// drafts by document, documents by source (ingest's lookup of an older
/// version) and in listing order.
pub(crate) const SCHEMA_V4: &str = r#"
CREATE TABLE IF NOT EXISTS kb_changes (
    kb_id   TEXT NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,
    seq     INTEGER NOT NULL,
    what    INTEGER NOT NULL,
    passage TEXT NOT NULL,
    PRIMARY KEY (kb_id, seq, what, passage)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS synonyms_by_kb ON synonyms (kb_id, id);
CREATE INDEX IF NOT EXISTS faqs_by_source_doc ON faqs (kb_id, source_doc);
CREATE INDEX IF NOT EXISTS documents_by_source ON documents (kb_id, source, owner);
CREATE INDEX IF NOT EXISTS documents_by_kb ON documents (kb_id, created_at, id);
-- The documents listing counts what an owner may see (unrestricted
-- documents and the owner's own) with this index of the restricted ones.
-- Partial, so that no lookup of unrestricted documents (`owner IS NULL`,
-- most of them) is tempted by it. An index only: data of format 4 without
-- it is read as before, and gets it at the next read-write open.
CREATE INDEX IF NOT EXISTS documents_restricted ON documents (kb_id, owner) WHERE owner IS NOT NULL;
-- FAQ entries in snapshot order, for reads a page at a time (`reembed`).
-- An index only, as above.
CREATE INDEX IF NOT EXISTS faqs_by_kb_created ON faqs (kb_id, created_at, id);
-- The FAQ listing of one status, a page at a time, and its count. An index
-- only, as above.
CREATE INDEX IF NOT EXISTS faqs_by_kb_status ON faqs (kb_id, status, created_at, id);
"#;

/// How many of a knowledge base's latest commits the change log keeps by
/// default.
pub const CHANGE_LOG_COMMITS: u64 = 4096;

/// Format 4's columns: `kbs.log_from` (set to the current commit for
/// knowledge bases from before the log: their earlier commits are unknown).
pub(crate) const V4_COLUMNS: &[(&str, &str, &str)] = &[("kbs", "log_from", "INTEGER")];

/// Columns added within format 4 (nullable, so a binary that does not know
/// them reads and writes the store as before): the sentence vectors of a
/// passage ([`rag_core::SentenceVectors::to_bytes`]), NULL for none.
/// Then a second embedder's vectors of the passage
/// ([`rag_core::WriteOp::PutSecondVectors`]) and that model's id.
pub(crate) const V5_COLUMNS: &[(&str, &str, &str)] = &[
    ("vectors", "sentences", "BLOB"),
    ("vectors", "second", "BLOB"),
    ("vectors", "second_model", "TEXT"),
];

/// The embedding cache, a separate database shared across data directories.
pub(crate) const CACHE_SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS embeddings (
    model  TEXT NOT NULL,
    hash   TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, hash)
) WITHOUT ROWID;
"#;
