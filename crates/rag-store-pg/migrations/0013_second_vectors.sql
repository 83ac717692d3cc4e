-- A second embedder's vectors of a passage (rag_core::WriteOp::PutSecondVectors:
-- its whole text's vector then its sentences', or an FAQ entry's question's,
-- as rag_core::SentenceVectors::to_bytes) and the id of the model that made
-- them. Read by passage for the fused candidates only, through the primary
-- key; not indexed. NULL for none; storing a new passage vector drops them.
ALTER TABLE ragscope.vectors ADD COLUMN second bytea;
ALTER TABLE ragscope.vectors ADD COLUMN second_model text;
