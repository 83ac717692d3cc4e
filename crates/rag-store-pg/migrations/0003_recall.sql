-- Recall inside PostgreSQL.
--
-- `passages` holds every searchable passage of a knowledge base as the
-- engine's own analyzer sees it (the store writes these rows in the same
-- transaction as the chunks, FAQ entries and facts they come from):
--   * `lex`: the analysed terms as a tsvector, one weight per field (A title,
--     B body, C tags, D Chinese character bigrams); a lexeme's positions in a
--     weight count its occurrences in that field (up to 255). Facts have none.
--     Recall reads `postings` (below); `lex` is the analysis as PostgreSQL's
--     own text-search type, for statistics maintenance and ad-hoc SQL
--     (`lex @@ '退款'::tsquery`), unindexed to keep writes cheap.
--   * `len_*`: field lengths in tokens; `match_text`: the normalised text
--     the substring path searches (pg_trgm index).
--   * filter columns (owner, tags, validity, creation time) and the hash of
--     the text its vector must have been made from.
-- `postings` lists, per term, the passages containing it with the term's
-- frequency in each field and the passage's field lengths: what BM25 reads
-- (derived from the same analysis as `lex`, in the same transaction; an
-- index range per query term instead of unnesting every matching tsvector).
-- `lex_terms` keeps each term's document frequencies per field and
-- `lex_stats` the passage count and summed field lengths: the statistics BM25
-- needs, kept exact by the writer (which holds the knowledge base's row lock).
-- `lex_stats.version` names the analysis the rows were made with; a store
-- finding another version (or none: data from before this migration)
-- rebuilds the knowledge base's rows.

CREATE TABLE ragscope.passages (
    tenant      text NOT NULL COLLATE "C",
    kb_id       uuid NOT NULL,
    passage     text NOT NULL COLLATE "C",
    -- 0 chunk, 1 FAQ entry, 2 fact; with created_at, grp and ordinal the
    -- order of the engine's snapshot (ties rank in this order).
    kind        smallint NOT NULL,
    created_at  bigint NOT NULL,
    grp         uuid NOT NULL,
    ordinal     integer NOT NULL,
    owner       text,
    tags_lc     text[] NOT NULL,
    valid_from  bigint,
    valid_until bigint,
    embed_hash  text NOT NULL,
    lex         tsvector,
    len_title   integer NOT NULL,
    len_body    integer NOT NULL,
    len_tags    integer NOT NULL,
    len_grams   integer NOT NULL,
    match_text  text NOT NULL,
    PRIMARY KEY (kb_id, passage),
    FOREIGN KEY (tenant, kb_id) REFERENCES ragscope.kbs (tenant, id) ON DELETE CASCADE
);
CREATE INDEX passages_match ON ragscope.passages USING gin (match_text gin_trgm_ops);
CREATE INDEX passages_by_grp ON ragscope.passages (kb_id, grp);

CREATE TABLE ragscope.postings (
    tenant    text NOT NULL COLLATE "C",
    kb_id     uuid NOT NULL,
    term      text NOT NULL COLLATE "C",
    passage   text NOT NULL COLLATE "C",
    tf_title  smallint NOT NULL,
    tf_body   smallint NOT NULL,
    tf_tags   smallint NOT NULL,
    tf_grams  smallint NOT NULL,
    len_title integer NOT NULL,
    len_body  integer NOT NULL,
    len_tags  integer NOT NULL,
    len_grams integer NOT NULL,
    PRIMARY KEY (kb_id, term, passage),
    FOREIGN KEY (tenant, kb_id) REFERENCES ragscope.kbs (tenant, id) ON DELETE CASCADE
);

CREATE TABLE ragscope.lex_terms (
    tenant    text NOT NULL COLLATE "C",
    kb_id     uuid NOT NULL,
    term      text NOT NULL COLLATE "C",
    -- Seen as an English word or identifier / as Chinese (typo paths).
    wordish   boolean NOT NULL,
    han       boolean NOT NULL,
    chars     integer NOT NULL,
    pinyin    text,
    df_title  integer NOT NULL,
    df_body   integer NOT NULL,
    df_tags   integer NOT NULL,
    df_grams  integer NOT NULL,
    -- Passages with the term in any word field / in any field.
    df_word   integer NOT NULL,
    df_any    integer NOT NULL,
    PRIMARY KEY (kb_id, term),
    FOREIGN KEY (tenant, kb_id) REFERENCES ragscope.kbs (tenant, id) ON DELETE CASCADE
);
CREATE INDEX lex_terms_trgm ON ragscope.lex_terms USING gin (term gin_trgm_ops);
CREATE INDEX lex_terms_pinyin ON ragscope.lex_terms (kb_id, pinyin) WHERE pinyin IS NOT NULL;

CREATE TABLE ragscope.lex_stats (
    tenant    text NOT NULL COLLATE "C",
    kb_id     uuid PRIMARY KEY,
    version   integer NOT NULL,
    n         bigint NOT NULL,
    sum_title bigint NOT NULL,
    sum_body  bigint NOT NULL,
    sum_tags  bigint NOT NULL,
    sum_grams bigint NOT NULL,
    FOREIGN KEY (tenant, kb_id) REFERENCES ragscope.kbs (tenant, id) ON DELETE CASCADE
);

DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['passages', 'postings', 'lex_terms', 'lex_stats'] LOOP
        EXECUTE format('ALTER TABLE ragscope.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE ragscope.%I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY tenant_isolation ON ragscope.%I
                          USING (tenant = current_setting(''ragscope.tenant'', true))
                          WITH CHECK (tenant = current_setting(''ragscope.tenant'', true))', t);
    END LOOP;
END
$$;
GRANT SELECT, INSERT, UPDATE, DELETE ON ragscope.passages, ragscope.postings, ragscope.lex_terms, ragscope.lex_stats TO ragscope_app;

-- Approximate nearest neighbours: the vector column has no fixed dimension
-- (it differs per knowledge base), so HNSW indexes are partial, one per
-- common dimension, over the column cast to that dimension. Queries of
-- other dimensions search exactly.
CREATE INDEX vectors_hnsw_384 ON ragscope.vectors USING hnsw ((vector::vector(384)) vector_cosine_ops) WHERE vector_dims(vector) = 384;
CREATE INDEX vectors_hnsw_512 ON ragscope.vectors USING hnsw ((vector::vector(512)) vector_cosine_ops) WHERE vector_dims(vector) = 512;
CREATE INDEX vectors_hnsw_768 ON ragscope.vectors USING hnsw ((vector::vector(768)) vector_cosine_ops) WHERE vector_dims(vector) = 768;
CREATE INDEX vectors_hnsw_1024 ON ragscope.vectors USING hnsw ((vector::vector(1024)) vector_cosine_ops) WHERE vector_dims(vector) = 1024;
CREATE INDEX vectors_hnsw_1536 ON ragscope.vectors USING hnsw ((vector::vector(1536)) vector_cosine_ops) WHERE vector_dims(vector) = 1536;

-- The substring and typo paths match with pg_trgm (`LIKE`, `%`), whose
-- operators are not leakproof: under the application role's row-level
-- security PostgreSQL evaluates them only after the policy, on every row,
-- and never through the trigram indexes. Two functions run these lookups as
-- `ragscope_search` (no login, no BYPASSRLS), whose read-only policy admits
-- every row, and confine themselves to the transaction's tenant
-- (`ragscope.tenant`, the same setting the policies read, which the caller
-- sets anyway): the same isolation, with the indexes.
DO $$
BEGIN
    CREATE ROLE ragscope_search NOLOGIN NOSUPERUSER NOINHERIT NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$;
GRANT USAGE ON SCHEMA ragscope TO ragscope_search;
GRANT SELECT ON ragscope.passages, ragscope.lex_terms TO ragscope_search;
CREATE POLICY search_reads ON ragscope.passages FOR SELECT TO ragscope_search USING (true);
CREATE POLICY search_reads ON ragscope.lex_terms FOR SELECT TO ragscope_search USING (true);

-- Each `LIKE` pattern's text passages in a knowledge base of the
-- transaction's tenant: (pattern ordinal from 1, passage).
CREATE FUNCTION ragscope.substring_matches(p_kb uuid, p_likes text[])
RETURNS TABLE (i bigint, passage text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pat.i, m.passage
    FROM unnest(p_likes) WITH ORDINALITY AS pat(l, i)
    CROSS JOIN LATERAL (
        SELECT p.passage FROM ragscope.passages p
        WHERE p.tenant = current_setting('ragscope.tenant', true) AND p.kb_id = p_kb AND p.kind < 2 AND p.match_text LIKE pat.l
        OFFSET 0  -- one trigram index scan per pattern, whatever the statistics say
    ) m
$$;

-- Vocabulary words of a knowledge base of the transaction's tenant similar
-- to `p_word` by trigrams (at least `p_threshold`), best first, more
-- frequent first among equals.
CREATE FUNCTION ragscope.similar_terms(p_kb uuid, p_word text, p_threshold real, p_limit bigint)
RETURNS TABLE (term text, similarity real)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT t.term, public.similarity(t.term, p_word) AS s
    FROM ragscope.lex_terms t
    WHERE t.tenant = current_setting('ragscope.tenant', true) AND t.kb_id = p_kb AND t.wordish AND t.chars >= 3
      AND t.term OPERATOR(public.%) p_word AND public.similarity(t.term, p_word) >= p_threshold
    ORDER BY s DESC, t.df_any DESC, t.term
    LIMIT p_limit
$$;

ALTER FUNCTION ragscope.substring_matches(uuid, text[]) OWNER TO ragscope_search;
ALTER FUNCTION ragscope.similar_terms(uuid, text, real, bigint) OWNER TO ragscope_search;
REVOKE ALL ON FUNCTION ragscope.substring_matches(uuid, text[]), ragscope.similar_terms(uuid, text, real, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ragscope.substring_matches(uuid, text[]), ragscope.similar_terms(uuid, text, real, bigint) TO ragscope_app;
