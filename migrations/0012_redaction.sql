-- Erasure (RedactItems). An item whose content was removed keeps its place
-- in the log, its turn, role and kind; its content becomes a tombstone and
-- this column keeps the SHA-256 (hex) of what was removed. NULL: never
-- redacted. Summary chunks derived from it are emptied in place (model
-- 'redacted', superseded by themselves), so chunk ids are never reused.
ALTER TABLE items
  ADD COLUMN redacted_sha256 text;

-- Items stay append-only but for that one change, made once: the content
-- (and metadata and count) of an item may be replaced while
-- redacted_sha256 goes from NULL to set; nothing else about it may move.
CREATE OR REPLACE FUNCTION items_are_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.redacted_sha256 IS NULL AND NEW.redacted_sha256 IS NOT NULL
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
