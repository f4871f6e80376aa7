-- Point-in-time views (GetContextAt). Every item records the version of
-- the conversation it was appended at (a summary marker, the version when
-- its chunk was written), and every change that is not an append records
-- what the view was built from afterwards: the prune boundary, the active
-- chunks, pins, prompts, model and corrections, keyed by the
-- compaction_version it moved to. Superseded chunks are kept, so any
-- recorded state can be assembled again.
ALTER TABLE items
  ADD COLUMN appended_version bigint;

CREATE TABLE view_states (
  conv_key           bigint NOT NULL REFERENCES conversations ON DELETE CASCADE,
  compaction_version bigint NOT NULL,
  version            bigint NOT NULL,
  state              jsonb  NOT NULL,
  created_at         timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (conv_key, compaction_version)
);
