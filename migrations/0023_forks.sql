-- Forks (ForkConversation): a conversation started from another one's items
-- 1..forked_at and the compaction state it had when forked_at was its last
-- item. Linked by the source's incarnation, as continuations are, so that
-- a redaction of an item reaches every copy of it (and only those), and a
-- source deleted and created again under its id has no forks.
ALTER TABLE conversations
  ADD COLUMN forked_from text NOT NULL DEFAULT '',
  ADD COLUMN forked_from_incarnation bigint,
  ADD COLUMN forked_at bigint NOT NULL DEFAULT 0;

CREATE INDEX conversations_forked_from ON conversations (tenant_id, forked_from)
  WHERE forked_from <> '';
