-- `passages_by_grp` led with kb_id, like the primary key (kb_id, passage).
-- When the planner's statistics do not know a knowledge base yet (one
-- loaded after the last ANALYZE, beside a much larger one), it guesses that
-- the knowledge base has a row or two, and both indexes look equally good
-- for BM25's per-candidate lookup `kb_id = $1 AND passage = …`; it took the
-- smaller one, which finds the knowledge base's rows by kb_id alone and
-- filters them by passage: every candidate read every row of the knowledge
-- base (measured: 1.6 s for one query of a 5,183-passage knowledge base
-- beside a 100,000-passage one, 19 ms with this index). Grouped deletes
-- find their rows by group alone; nothing else leads with kb_id but the
-- primary key, so that lookup can only take the primary key.
DROP INDEX ragscope.passages_by_grp;
CREATE INDEX passages_by_grp ON ragscope.passages (grp);
