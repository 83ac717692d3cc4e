-- The script counts a knowledge base's language is judged by (Han
-- characters and ASCII letters of each searchable text passage's match
-- text, as the in-memory index counts them), per passage and summed per
-- knowledge base, so that an engine reading only the knowledge base's head
-- (facts, synonyms, dictionary, counts) knows its language without reading
-- its text. Rows made before this migration count zero; the layout version
-- written with them changed too, so they are rebuilt when next written or
-- searched.
ALTER TABLE ragscope.passages ADD COLUMN han integer NOT NULL DEFAULT 0,
                              ADD COLUMN latin integer NOT NULL DEFAULT 0;
ALTER TABLE ragscope.lex_stats ADD COLUMN han bigint NOT NULL DEFAULT 0,
                               ADD COLUMN latin bigint NOT NULL DEFAULT 0;
