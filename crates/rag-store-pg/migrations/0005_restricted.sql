-- Indexes of what is restricted to an owner, partial so that lookups of
-- the unrestricted rows (most of them) never choose them.
--
-- The documents listing is read a page at a time (keyset pagination on
-- documents_by_kb) and carries how many documents the caller may see: all
-- of them, less the restricted ones, plus the caller's own.
CREATE INDEX documents_restricted ON ragscope.documents (kb_id, owner) WHERE owner IS NOT NULL;
-- Recall asks whether a knowledge base holds restricted passages at all
-- before it reads the vocabulary for a viewer: when none, the vocabulary is
-- read as it is; else only through the passages the viewer may see.
CREATE INDEX passages_restricted ON ragscope.passages (kb_id) WHERE owner IS NOT NULL;
