-- The table Debezium's JDBC sink keeps equal to the current chunks (chunks-pgvector.json).
-- Created here, not by the sink's schema evolution, for two things it would not choose: the
-- embedding as pgvector's 32-bit `vector(384)` (the model's dimension) and the indexes.
-- Columns are the ChunkEvent fields (schemas/chunk-event.connect.json), `source` flattened by
-- Connect's stock Flatten transform into source_topic/source_partition/source_offset.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE IF NOT EXISTS chunks (
    chunk_id         text PRIMARY KEY,
    doc_id           text NOT NULL,
    doc_version      text,
    index            bigint NOT NULL,
    count            bigint NOT NULL,
    text             text NOT NULL,
    start_index      bigint NOT NULL,
    end_index        bigint NOT NULL,
    token_count      bigint NOT NULL,
    strategy         text NOT NULL,
    metadata         jsonb NOT NULL,
    source_topic     text NOT NULL,
    source_partition bigint NOT NULL,
    source_offset    bigint NOT NULL,
    produced_at      timestamptz NOT NULL,
    schema_version   bigint NOT NULL,
    spans            jsonb,
    doc_source       text,
    language         text,
    embedding        vector(384),
    embedding_model  text
);

-- Nearest chunks by cosine distance (`ORDER BY embedding <=> $1`): the model's vectors are
-- L2-normalised, so cosine is the distance it was trained for.
CREATE INDEX IF NOT EXISTS chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops);
-- A document's chunks, for "what does the index hold of document X".
CREATE INDEX IF NOT EXISTS chunks_doc_id ON chunks (doc_id);
