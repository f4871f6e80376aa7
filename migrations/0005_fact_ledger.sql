-- The fact ledger. Each summary chunk keeps, beside its text, its
-- structured content: the attributed lines an extractive summary was built
-- from (what a fold merges), and the facts and standing instructions of
-- the span it replaces, each with the item it came from. `recall` is the
-- share of those facts present in the chunk or the ledger at commit; NULL
-- for chunks written before it was measured.
ALTER TABLE summary_chunks
  ADD COLUMN structure jsonb NOT NULL DEFAULT '{}',
  ADD COLUMN recall    double precision CHECK (recall IS NULL OR (recall >= 0 AND recall <= 1));
