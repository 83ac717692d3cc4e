-- BM25 reads each query term's postings by the primary key (kb_id, term,
-- passage). Without the frequencies and lengths in the key's leaf pages,
-- PostgreSQL visited the table for every posting: one heap page each, since
-- a term's postings are spread over the pages of every passage holding it
-- (measured on 100,000 passages: 71,787 postings of one question, 443 ms,
-- 64,287 page reads). With them included, and the tenant that row-level
-- security checks, the same read is an index-only scan of consecutive leaf
-- pages (55 ms), as are the per-candidate probes of MaxScore's pruning.
-- Index-only scans skip only the pages the visibility map marks all-visible,
-- which vacuum sets; autovacuum's default waits for inserts of a fifth of
-- the table, so this table asks for it after a fiftieth.
ALTER TABLE ragscope.postings
    DROP CONSTRAINT postings_pkey,
    ADD CONSTRAINT postings_pkey PRIMARY KEY (kb_id, term, passage)
        INCLUDE (tenant, tf_title, tf_body, tf_tags, tf_grams, len_title, len_body, len_tags, len_grams);
ALTER TABLE ragscope.postings SET (autovacuum_vacuum_insert_scale_factor = 0.02);
