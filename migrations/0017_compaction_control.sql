-- Compaction proposals (Compact with dry_run): a summary planned and made
-- but not stored in the conversation, kept until it expires so that any
-- replica can apply it (ApplyCompaction), as made or with the caller's
-- edited text. `body` is the service's encoding; once applied, the chunk
-- written and the answer given are kept, so that a retry of the apply gets
-- the same answer. Counted in the conversation's stored bytes, as the other
-- tables written off the append path (0015); expired proposals are removed
-- when the conversation makes its next one, and their bytes with them.
CREATE TABLE compaction_proposals (
  conv_key                   bigint      NOT NULL REFERENCES conversations ON DELETE CASCADE,
  proposal_id                bigint      NOT NULL,
  created_at                 timestamptz NOT NULL DEFAULT now(),
  expires_at                 timestamptz NOT NULL,
  body                       text        NOT NULL,
  applied_chunk_id           bigint,
  applied_compaction_version bigint,
  applied_answer             text,
  PRIMARY KEY (conv_key, proposal_id)
);

CREATE TRIGGER compaction_proposals_bytes_in AFTER INSERT ON compaction_proposals
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_stored_bytes();
CREATE TRIGGER compaction_proposals_bytes_up AFTER UPDATE ON compaction_proposals
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION count_stored_bytes();

-- Idle compaction: when a conversation above its idle band should be
-- compacted if no BuildContext comes first (its last BuildContext plus its
-- prompt cache's lifetime). A replica claims due conversations and clears
-- this in one statement, so that exactly one compacts each.
ALTER TABLE conversations ADD COLUMN idle_due_at timestamptz;
CREATE INDEX conversations_idle_due ON conversations (idle_due_at)
  WHERE idle_due_at IS NOT NULL;
