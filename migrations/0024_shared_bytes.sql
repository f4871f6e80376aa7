-- A fork's items at or before its fork point are copies of its source's
-- (0023, storage/postgres_forks.cc): a tenant's usage counts them once, to
-- the source, while the source lives. shared_bytes is what of a
-- conversation's stored_bytes those copies take; a tenant's usage sums
-- stored_bytes - shared_bytes. It is kept by every call that changes a
-- fork's link or what it shares (fork, rewind, delete of a source,
-- erasure). Forks made before this migration count their copies in full
-- until one of those calls recounts them.
ALTER TABLE conversations ADD COLUMN shared_bytes bigint NOT NULL DEFAULT 0;
