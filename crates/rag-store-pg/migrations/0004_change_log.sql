-- The change log: per knowledge base and commit, what the commit touched,
-- written by the store in the commit's own transaction (under the knowledge
-- base's row lock), so that an engine holding indexes built at an earlier
-- commit reads only what changed since (`changes_since`):
--   what 0: a passage written or deleted (`passage` its id, "chunk:…",
--           "faq:…", "fact:…"); 1: a passage's vector written; 2: a synonym
--           group added; 3: the user dictionary changed; 4: every vector
--           cleared or the embedding space fixed (`passage` '' for 2–4).
-- The log keeps each knowledge base's last commits; `kbs.log_from` is the
-- commit it holds every later commit of (NULL: none yet, for knowledge bases
-- from before this migration until their next write).
ALTER TABLE ragscope.kbs ADD COLUMN log_from bigint;
UPDATE ragscope.kbs SET log_from = seq;

CREATE TABLE ragscope.kb_changes (
    tenant  text NOT NULL COLLATE "C",
    kb_id   uuid NOT NULL,
    seq     bigint NOT NULL,
    what    smallint NOT NULL,
    passage text NOT NULL COLLATE "C",
    PRIMARY KEY (kb_id, seq, what, passage),
    FOREIGN KEY (tenant, kb_id) REFERENCES ragscope.kbs (tenant, id) ON DELETE CASCADE
);
ALTER TABLE ragscope.kb_changes ENABLE ROW LEVEL SECURITY;
ALTER TABLE ragscope.kb_changes FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON ragscope.kb_changes
    USING (tenant = current_setting('ragscope.tenant', true))
    WITH CHECK (tenant = current_setting('ragscope.tenant', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON ragscope.kb_changes TO ragscope_app;

-- Ingest finds the earlier version of a file by its source and owner.
CREATE INDEX documents_by_source ON ragscope.documents (kb_id, source, owner);
