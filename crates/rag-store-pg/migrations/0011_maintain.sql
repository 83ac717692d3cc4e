-- Planner statistics after large loads. Autovacuum analyses a table once a
-- tenth of it has changed, so a knowledge base loaded beside a larger one
-- can stay unknown to the planner for long (see docs/postgres.md, migration
-- 8's finding). The application analyses the recall tables itself after a
-- write that doubled a knowledge base (crates/rag-store-pg/src/analyze.rs),
-- which needs the MAINTAIN privilege of PostgreSQL 17 and later. On an older
-- server nothing is granted and the application does not try.
--
-- MAINTAIN also allows VACUUM, REINDEX, CLUSTER and LOCK TABLE on these
-- tables; it does not bypass row-level security, and pg_stats keeps hiding
-- the statistics of a table under row-level security from this role.
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 170000 THEN
        EXECUTE 'GRANT MAINTAIN ON ragscope.passages, ragscope.postings, ragscope.lex_terms, ragscope.vectors TO ragscope_app';
    END IF;
END
$$;
