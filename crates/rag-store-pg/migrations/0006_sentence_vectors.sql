-- The sentence vectors of a passage of several sentences, beside its
-- passage vector (rag_core::SentenceVectors::to_bytes: int8 codes with a
-- scale per sentence). The dense path reads them by passage for its best
-- candidates only, through the primary key; they are not indexed.
-- NULL for none; storing a new passage vector drops them.
ALTER TABLE ragscope.vectors ADD COLUMN sentences bytea;
