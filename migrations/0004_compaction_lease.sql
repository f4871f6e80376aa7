-- The per-conversation compaction lease: at most one compaction of a
-- conversation runs at a time across all replicas. A holder that dies frees
-- it when it expires. Each grant increments lease_token, the fencing token
-- that a compaction's commit must still match.
ALTER TABLE conversations
  ADD COLUMN lease_holder     text,
  ADD COLUMN lease_token      bigint NOT NULL DEFAULT 0,
  ADD COLUMN lease_expires_at timestamptz;
