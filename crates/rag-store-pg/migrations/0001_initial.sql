-- ragscope PostgreSQL schema, version 1.
--
-- Applied by the admin connection (the owner of everything here) inside one
-- transaction. Every tenant-owned table has a `tenant` column and a row-level
-- security policy on the per-transaction setting `ragscope.tenant`, forced
-- also for the owner. The application connects as `ragscope_app`, which owns
-- nothing, is no superuser and cannot bypass row-level security.
-- Ids are assigned by the engine (UUID v7); the database assigns none.

CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE SCHEMA IF NOT EXISTS ragscope;

CREATE TABLE ragscope.tenants (
    tenant     text PRIMARY KEY COLLATE "C" CHECK (tenant <> ''),
    created_at bigint NOT NULL
);

CREATE TABLE ragscope.kbs (
    id          uuid PRIMARY KEY,
    tenant      text NOT NULL COLLATE "C" CHECK (tenant <> ''),
    name        text NOT NULL COLLATE "C",
    created_at  bigint NOT NULL,
    settings    jsonb NOT NULL,
    seq         bigint NOT NULL DEFAULT 0,
    -- The embedding space of the stored vectors (NULL until the first vector).
    embed_model text,
    embed_dims  integer,
    UNIQUE (tenant, name),
    UNIQUE (tenant, id)
);

CREATE TABLE ragscope.documents (
    id           uuid PRIMARY KEY,
    tenant       text NOT NULL COLLATE "C",
    kb_id        uuid NOT NULL,
    title        text NOT NULL,
    source       text NOT NULL,
    content_hash text NOT NULL,
    tags         text[] NOT NULL,
    created_at   bigint NOT NULL,
    updated_at   bigint NOT NULL,
    text         text NOT NULL,
    owner        text,
    FOREIGN KEY (tenant, kb_id) REFERENCES ragscope.kbs (tenant, id) ON DELETE CASCADE
);
CREATE INDEX documents_by_hash ON ragscope.documents (kb_id, content_hash);
CREATE INDEX documents_by_kb ON ragscope.documents (kb_id, created_at, id);

CREATE TABLE ragscope.chunks (
    id           uuid PRIMARY KEY,
    tenant       text NOT NULL COLLATE "C",
    doc_id       uuid NOT NULL REFERENCES ragscope.documents (id) ON DELETE CASCADE,
    kb_id        uuid NOT NULL,
    ordinal      integer NOT NULL,
    heading_path jsonb NOT NULL,
    text         text NOT NULL,
    start_byte   bigint NOT NULL,
    end_byte     bigint NOT NULL,
    FOREIGN KEY (tenant, kb_id) REFERENCES ragscope.kbs (tenant, id) ON DELETE CASCADE
);
CREATE INDEX chunks_by_doc ON ragscope.chunks (doc_id, ordinal);
CREATE INDEX chunks_by_kb ON ragscope.chunks (kb_id);

CREATE TABLE ragscope.faqs (
    id          uuid PRIMARY KEY,
    tenant      text NOT NULL COLLATE "C",
    kb_id       uuid NOT NULL,
    question    text NOT NULL,
    answer      text NOT NULL,
    status      text NOT NULL CHECK (status IN ('approved', 'pending', 'disabled')),
    edited      boolean NOT NULL,
    source_url  text,
    tags        text[] NOT NULL,
    created_at  bigint NOT NULL,
    updated_at  bigint NOT NULL,
    valid_from  bigint,
    valid_until bigint,
    FOREIGN KEY (tenant, kb_id) REFERENCES ragscope.kbs (tenant, id) ON DELETE CASCADE
);
CREATE INDEX faqs_by_kb ON ragscope.faqs (kb_id, created_at, id);

CREATE TABLE ragscope.facts (
    id           uuid PRIMARY KEY,
    tenant       text NOT NULL COLLATE "C",
    kb_id        uuid NOT NULL,
    key          text NOT NULL,
    value        text NOT NULL,
    key_synonyms text[] NOT NULL,
    FOREIGN KEY (tenant, kb_id) REFERENCES ragscope.kbs (tenant, id) ON DELETE CASCADE
);
CREATE INDEX facts_by_kb ON ragscope.facts (kb_id, id);

-- Synonym groups in the order they were added: `position` counts per
-- knowledge base (the writer holds the knowledge base's row lock).
CREATE TABLE ragscope.synonyms (
    tenant   text NOT NULL COLLATE "C",
    kb_id    uuid NOT NULL,
    position bigint NOT NULL,
    terms    text[] NOT NULL,
    PRIMARY KEY (kb_id, position),
    FOREIGN KEY (tenant, kb_id) REFERENCES ragscope.kbs (tenant, id) ON DELETE CASCADE
);

CREATE TABLE ragscope.user_words (
    tenant text NOT NULL COLLATE "C",
    kb_id  uuid NOT NULL,
    word   text NOT NULL COLLATE "C",
    freq   bigint,
    PRIMARY KEY (kb_id, word),
    FOREIGN KEY (tenant, kb_id) REFERENCES ragscope.kbs (tenant, id) ON DELETE CASCADE
);

-- Vectors of passages ("chunk:…", "faq:…", "fact:…"). The column has no fixed
-- dimension because it differs per knowledge base; the store checks every
-- vector against the knowledge base's recorded space (kbs.embed_dims).
CREATE TABLE ragscope.vectors (
    tenant    text NOT NULL COLLATE "C",
    kb_id     uuid NOT NULL,
    passage   text NOT NULL COLLATE "C",
    text_hash text NOT NULL,
    vector    vector NOT NULL,
    PRIMARY KEY (kb_id, passage),
    FOREIGN KEY (tenant, kb_id) REFERENCES ragscope.kbs (tenant, id) ON DELETE CASCADE
);

CREATE TABLE ragscope.sources (
    id         uuid PRIMARY KEY,
    tenant     text NOT NULL COLLATE "C",
    kb_id      uuid NOT NULL,
    url        text NOT NULL,
    depth      bigint NOT NULL,
    max_pages  bigint NOT NULL,
    owner      text,
    status     text NOT NULL,
    reason     text,
    created_at bigint NOT NULL,
    last_sync  bigint,
    pages      jsonb NOT NULL,
    FOREIGN KEY (tenant, kb_id) REFERENCES ragscope.kbs (tenant, id) ON DELETE CASCADE
);
CREATE INDEX sources_by_kb ON ragscope.sources (kb_id, created_at, id);

CREATE TABLE ragscope.api_keys (
    id         text PRIMARY KEY COLLATE "C",
    hash       text NOT NULL UNIQUE,
    tenant     text NOT NULL COLLATE "C" CHECK (tenant <> ''),
    role       text NOT NULL,
    owner      text,
    kb         text,
    label      text NOT NULL,
    prefix     text NOT NULL,
    created_at bigint NOT NULL,
    revoked    boolean NOT NULL DEFAULT false
);

CREATE TABLE ragscope.query_log (
    id           text PRIMARY KEY COLLATE "C",
    tenant       text NOT NULL COLLATE "C",
    kb_id        uuid NOT NULL,
    created_at   bigint NOT NULL,
    query        text NOT NULL,
    conversation text COLLATE "C",
    kb_miss      boolean NOT NULL,
    feedback     text,
    owner        text,
    record       jsonb NOT NULL,
    FOREIGN KEY (tenant, kb_id) REFERENCES ragscope.kbs (tenant, id) ON DELETE CASCADE
);
CREATE INDEX query_log_by_kb ON ragscope.query_log (kb_id, created_at);
CREATE INDEX query_log_by_conversation ON ragscope.query_log (tenant, conversation, created_at);

-- Row-level security: a row is visible and writable only inside a
-- transaction whose `ragscope.tenant` setting names its tenant. Without the
-- setting, current_setting(…, true) is NULL (or '' once a transaction-local
-- value has ended), which matches no row.
DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['tenants', 'kbs', 'documents', 'chunks', 'faqs', 'facts', 'synonyms', 'user_words',
                             'vectors', 'sources', 'api_keys', 'query_log'] LOOP
        EXECUTE format('ALTER TABLE ragscope.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE ragscope.%I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY tenant_isolation ON ragscope.%I
                          USING (tenant = current_setting(''ragscope.tenant'', true))
                          WITH CHECK (tenant = current_setting(''ragscope.tenant'', true))', t);
    END LOOP;
END
$$;

-- Roles. `ragscope_app` is what the application logs in as; `ragscope_auth`
-- owns the three functions that must see across tenants (authenticating a key
-- by its hash, listing tenants and listing keys for the operator). Neither
-- owns a table; neither is a member of the other.
DO $$
BEGIN
    CREATE ROLE ragscope_app LOGIN NOSUPERUSER NOINHERIT NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$;
DO $$
BEGIN
    CREATE ROLE ragscope_auth NOLOGIN NOSUPERUSER NOINHERIT NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$;

GRANT USAGE ON SCHEMA ragscope TO ragscope_app, ragscope_auth;
GRANT SELECT, INSERT, UPDATE, DELETE ON ragscope.kbs, ragscope.documents, ragscope.chunks, ragscope.faqs,
    ragscope.facts, ragscope.synonyms, ragscope.user_words, ragscope.vectors, ragscope.sources,
    ragscope.api_keys, ragscope.query_log TO ragscope_app;
GRANT SELECT, INSERT ON ragscope.tenants TO ragscope_app;
GRANT SELECT ON ragscope.schema_migrations TO ragscope_app;

-- The authentication role reads keys and tenants across tenants, nothing else.
GRANT SELECT ON ragscope.api_keys, ragscope.tenants TO ragscope_auth;
CREATE POLICY auth_reads_all ON ragscope.api_keys FOR SELECT TO ragscope_auth USING (true);
CREATE POLICY auth_reads_all ON ragscope.tenants FOR SELECT TO ragscope_auth USING (true);

CREATE FUNCTION ragscope.auth_key_by_hash(p_hash text)
RETURNS TABLE (id text, tenant text, role text, owner text, label text, prefix text, created_at bigint, revoked boolean, kb text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT k.id, k.tenant, k.role, k.owner, k.label, k.prefix, k.created_at, k.revoked, k.kb
    FROM ragscope.api_keys k WHERE k.hash = p_hash
$$;

CREATE FUNCTION ragscope.auth_keys()
RETURNS TABLE (id text, tenant text, role text, owner text, label text, prefix text, created_at bigint, revoked boolean, kb text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT k.id, k.tenant, k.role, k.owner, k.label, k.prefix, k.created_at, k.revoked, k.kb
    FROM ragscope.api_keys k ORDER BY k.created_at, k.id
$$;

CREATE FUNCTION ragscope.auth_tenants()
RETURNS TABLE (tenant text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT t.tenant FROM ragscope.tenants t ORDER BY t.tenant
$$;

ALTER FUNCTION ragscope.auth_key_by_hash(text) OWNER TO ragscope_auth;
ALTER FUNCTION ragscope.auth_keys() OWNER TO ragscope_auth;
ALTER FUNCTION ragscope.auth_tenants() OWNER TO ragscope_auth;
REVOKE ALL ON FUNCTION ragscope.auth_key_by_hash(text), ragscope.auth_keys(), ragscope.auth_tenants() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ragscope.auth_key_by_hash(text), ragscope.auth_keys(), ragscope.auth_tenants() TO ragscope_app;
