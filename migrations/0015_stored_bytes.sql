-- Tenants' byte limits count every byte a conversation stores, not item
-- content alone: its prompts and metadata, items with their metadata, the
-- summaries, the view states every pin, unpin and compaction records (each
-- with a copy of the prompts), audit rows, idempotency records, pins,
-- recounts and usage reports. conversations.stored_bytes keeps the total.
-- Appends, creates, updates and redactions add to it in their own
-- statements, by the measure of storage/stored_bytes.h (the text's bytes
-- and a fixed amount per row), which the totals below start from; the
-- tables written off the append path add to it by the triggers below, with
-- the size PostgreSQL stores each row in (pg_column_size).
ALTER TABLE conversations RENAME COLUMN content_bytes TO stored_bytes;

CREATE FUNCTION count_stored_bytes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    UPDATE conversations c SET stored_bytes = c.stored_bytes + d.n
      FROM (SELECT conv_key, sum(pg_column_size(r.*))::bigint AS n FROM new_rows r
             GROUP BY conv_key) d
     WHERE c.conv_key = d.conv_key;
  ELSE
    UPDATE conversations c SET stored_bytes = greatest(0, c.stored_bytes + d.n)
      FROM (SELECT conv_key, sum(n)::bigint AS n
              FROM (SELECT conv_key, pg_column_size(r.*) AS n FROM new_rows r
                    UNION ALL
                    SELECT conv_key, -pg_column_size(r.*) FROM old_rows r) x
             GROUP BY conv_key) d
     WHERE c.conv_key = d.conv_key;
  END IF;
  RETURN NULL;
END;
$$;

-- (Re)creates the triggers; the layout of hash partitions, which recreates
-- the tables, calls it again.
CREATE FUNCTION install_stored_bytes_triggers() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['summary_chunks', 'view_states', 'compaction_events', 'item_pins',
                           'item_token_counts'] LOOP
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %I', t || '_bytes_in', t);
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %I REFERENCING NEW TABLE AS new_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION count_stored_bytes()', t || '_bytes_in', t);
  END LOOP;
  FOREACH t IN ARRAY ARRAY['summary_chunks', 'view_states', 'item_token_counts',
                           'idempotency_keys'] LOOP
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %I', t || '_bytes_up', t);
    EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %I REFERENCING OLD TABLE AS old_rows '
                   'NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION '
                   'count_stored_bytes()', t || '_bytes_up', t);
  END LOOP;
END;
$$;
SELECT install_stored_bytes_triggers();

-- What conversations hold so far, by the same measures.
UPDATE conversations c SET stored_bytes =
  octet_length(c.system_prompt) + octet_length(c.pinned_instructions) + 128
  + coalesce((SELECT sum(octet_length(key) + octet_length(value))
                FROM jsonb_each_text(c.metadata)), 0)
  + coalesce((SELECT sum(octet_length(x.content) + octet_length(x.tool_name)
                         + octet_length(x.tool_call_id) + 64
                         + coalesce((SELECT sum(octet_length(key) + octet_length(value))
                                       FROM jsonb_each_text(x.metadata)), 0))
                FROM items x WHERE x.conv_key = c.conv_key), 0)
  + coalesce((SELECT sum(octet_length(x.idempotency_key) + octet_length(x.request_fingerprint)
                         + 64)
                FROM idempotency_keys x WHERE x.conv_key = c.conv_key), 0)
  + 64 * (SELECT count(*) FROM provider_usage x WHERE x.conv_key = c.conv_key)
  + coalesce((SELECT sum(n) FROM (
      SELECT pg_column_size(x.*)::bigint AS n FROM summary_chunks x WHERE x.conv_key = c.conv_key
      UNION ALL SELECT pg_column_size(x.*) FROM view_states x WHERE x.conv_key = c.conv_key
      UNION ALL SELECT pg_column_size(x.*) FROM compaction_events x WHERE x.conv_key = c.conv_key
      UNION ALL SELECT pg_column_size(x.*) FROM item_pins x WHERE x.conv_key = c.conv_key
      UNION ALL SELECT pg_column_size(x.*) FROM item_token_counts x
                 WHERE x.conv_key = c.conv_key) s), 0);

-- A limited tenant's total, kept exact for its appends and creates, which
-- take this row's lock to check and count at once (so parallel calls
-- cannot overshoot); counted again from the conversations at least every
-- minute, which takes in what compactions and unlimited periods added.
-- One row per tenant, not per conversation: on Citus a reference table, or
-- distributed by tenant_id.
CREATE TABLE tenant_usage (
  tenant_id     text        PRIMARY KEY,
  stored_bytes  bigint      NOT NULL,
  conversations bigint      NOT NULL,
  counted_at    timestamptz NOT NULL
);
