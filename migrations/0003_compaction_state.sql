-- Compaction state on the conversation. The model's view starts after
-- `summarized_through` (the last sequence a summary chunk covers); marker
-- items in the log record each chunk where it was written. Tool results up
-- to `prune_boundary` are shown as placeholders; it only moves forward, so
-- the prompt prefix stays stable for provider prompt caches.
ALTER TABLE conversations RENAME COLUMN marker_sequence TO summarized_through;
ALTER TABLE conversations
  ADD COLUMN prune_boundary bigint NOT NULL DEFAULT 0 CHECK (prune_boundary >= 0);

CREATE INDEX summary_chunks_active ON summary_chunks (conv_key, chunk_id)
  WHERE superseded_by IS NULL;
