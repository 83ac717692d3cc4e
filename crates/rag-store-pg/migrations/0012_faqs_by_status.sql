-- The FAQ listing of one status (the workbench's and the API's filter), a
-- page at a time in (created_at, id) order, and its count: without this
-- index a page of pending entries among many approved ones reads every
-- entry of the knowledge base.
CREATE INDEX faqs_by_kb_status ON ragscope.faqs (kb_id, status, created_at, id);
