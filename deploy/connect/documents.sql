-- An example table of documents for Debezium's PostgreSQL source (documents-debezium.json):
-- one row per document, the text in `body`. Map your own table with the worker's row settings
-- instead (docs/operating/from-a-table.md); what a table needs is below the CREATE TABLE.
CREATE TABLE IF NOT EXISTS documents (
    id           text PRIMARY KEY,
    title        text,
    body         text NOT NULL,
    content_type text NOT NULL DEFAULT 'text/plain',
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- An update that leaves a large (TOASTed) body unchanged carries the old body only with
-- REPLICA IDENTITY FULL: without it the change event holds a placeholder in its place, which
-- the worker refuses rather than chunk (the `unavailable_value` dead letter).
ALTER TABLE documents REPLICA IDENTITY FULL;

-- The connector reads this publication (publication.autocreate.mode=disabled: creating one
-- itself would need a superuser or the table's owner).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'chunkstream_documents') THEN
        CREATE PUBLICATION chunkstream_documents FOR TABLE documents;
    END IF;
END
$$;
