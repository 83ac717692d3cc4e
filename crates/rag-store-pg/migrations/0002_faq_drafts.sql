-- FAQ entries drafted by an LLM from a document keep a link to it
-- (NULL for entries people wrote). No foreign key: deleting a document
-- unlinks its edited drafts and deletes the unedited ones in the same
-- write, which the store does explicitly (as the embedded store does).
ALTER TABLE ragscope.faqs ADD COLUMN source_doc uuid;
CREATE INDEX faqs_by_source_doc ON ragscope.faqs (kb_id, source_doc) WHERE source_doc IS NOT NULL;
