-- Erasure leaves no way back to what was erased. A redacted item used to
-- keep the plain SHA-256 of its content, which every reader saw and which
-- gives a short secret (a PIN, a phone number) away to a brute-force search.
-- The column now keeps an HMAC-SHA-256 under a key of the server's
-- (--redaction_key_file), as 'hmac-sha256:<hex>', or '' when the server
-- keeps no digest; NULL still means never redacted. The plain hashes kept
-- so far are removed: they cannot be keyed after the fact.
ALTER TABLE items RENAME COLUMN redacted_sha256 TO redacted_digest;

CREATE OR REPLACE FUNCTION items_are_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.redacted_digest IS NULL AND NEW.redacted_digest IS NOT NULL
     AND NEW.conv_key = OLD.conv_key AND NEW.sequence = OLD.sequence
     AND NEW.turn_index = OLD.turn_index AND NEW.role = OLD.role AND NEW.kind = OLD.kind
     AND NEW.kind <> 'summary_marker'
     AND NEW.tool_name = OLD.tool_name AND NEW.tool_call_id = OLD.tool_call_id
     AND NEW.pinned = OLD.pinned AND NEW.created_at = OLD.created_at
     AND NEW.summary_chunk_id IS NOT DISTINCT FROM OLD.summary_chunk_id
     AND NEW.appended_version IS NOT DISTINCT FROM OLD.appended_version THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'items are append-only (RedactItems alone may erase content, once)';
END;
$$;

-- The append-only rule held aside for this one change (on partitions the
-- rule is each partition's trigger).
DO $$
DECLARE
  t record;
BEGIN
  FOR t IN SELECT tgrelid::regclass AS tbl FROM pg_trigger WHERE tgname = 'items_append_only' LOOP
    EXECUTE format('ALTER TABLE %s DISABLE TRIGGER items_append_only', t.tbl);
  END LOOP;
  UPDATE items SET redacted_digest = '' WHERE redacted_digest IS NOT NULL;
  FOR t IN SELECT tgrelid::regclass AS tbl FROM pg_trigger WHERE tgname = 'items_append_only' LOOP
    EXECUTE format('ALTER TABLE %s ENABLE TRIGGER items_append_only', t.tbl);
  END LOOP;
END;
$$;

-- Conversations continued from one (CreateConversation continue_from) carry
-- copies of its summaries; a redaction finds them by this index.
CREATE INDEX conversations_continued_from ON conversations (tenant_id, continued_from)
  WHERE continued_from <> '';
