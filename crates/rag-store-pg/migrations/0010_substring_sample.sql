-- The substring path weighs each pattern by the number of passages holding
-- it, which `LIKE` through the trigram index finds only by reading the
-- posting lists of every trigram of the pattern and every passage's text
-- they point to: for the 16 patterns of one question over 100,000 passages,
-- 18,331 passages and 551 ms. In a knowledge base above 20,000 passages a
-- common pattern is now weighed by its count in a fixed sample of about one
-- passage in 32 (those whose id hashes to 0 modulo 32), found through this
-- trigram index of the sample alone; its passages are read only when it
-- must propose candidates (the heaviest patterns, as in MaxScore). Patterns
-- the sample finds too rarely to estimate are read.
CREATE INDEX passages_match_sample ON ragscope.passages USING gin (match_text gin_trgm_ops)
    WHERE (hashtext(passage) & 31) = 0;

-- Each `LIKE` pattern's count among the sampled text passages of a
-- knowledge base of the transaction's tenant: (pattern ordinal from 1, count).
CREATE FUNCTION ragscope.substring_sample(p_kb uuid, p_likes text[])
RETURNS TABLE (i bigint, hits bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pat.i, (
        SELECT count(*) FROM ragscope.passages p
        WHERE p.tenant = current_setting('ragscope.tenant', true) AND p.kb_id = p_kb AND p.kind < 2
          AND (hashtext(p.passage) & 31) = 0 AND p.match_text LIKE pat.l
    )
    FROM unnest(p_likes) WITH ORDINALITY AS pat(l, i)
$$;

ALTER FUNCTION ragscope.substring_sample(uuid, text[]) OWNER TO ragscope_search;
REVOKE ALL ON FUNCTION ragscope.substring_sample(uuid, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ragscope.substring_sample(uuid, text[]) TO ragscope_app;
