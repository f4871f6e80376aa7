-- Conversation keys derived from what names a conversation. conv_key, the
-- key every table is partitioned (and on Citus distributed) by, becomes the
-- first 63 bits of SHA-256(tenant_id, NUL, conversation_id), which any
-- replica computes from a request with no lookup (storage/distribution_key.h
-- does the same in C++). Every statement about one conversation names it by
-- conv_key, so it is routed to the one partition or shard that holds it; the
-- unique index on (tenant_id, conversation_id), which a distributed table
-- could not keep, goes: two names with one key would collide on the primary
-- key instead (one chance in 2^63 per pair).
--
-- A conversation deleted and created again under the same name gets the same
-- conv_key; `incarnation` tells the two apart (what replicas' caches check).

CREATE FUNCTION conversation_key(tenant_id text, conversation_id text) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT ('x' || encode(substring(sha256(convert_to(tenant_id, 'UTF8') || '\x00'::bytea
                                         || convert_to(conversation_id, 'UTF8'))
                                  FROM 1 FOR 8), 'hex'))::bit(64)::bigint
         & 9223372036854775807
$$;

-- Existing conversations keep their old key as their incarnation; new ones
-- draw theirs after every key the identity handed out.
ALTER TABLE conversations ADD COLUMN incarnation bigint;
UPDATE conversations SET incarnation = conv_key;
CREATE SEQUENCE conversations_incarnation_seq OWNED BY conversations.incarnation;
SELECT setval('conversations_incarnation_seq',
              (SELECT last_value FROM conversations_conv_key_seq));
ALTER TABLE conversations
  ALTER COLUMN incarnation SET DEFAULT nextval('conversations_incarnation_seq'),
  ALTER COLUMN incarnation SET NOT NULL,
  ALTER COLUMN conv_key DROP IDENTITY;

-- Every row of every table moves to its conversation's derived key, with the
-- foreign keys between them set aside meanwhile and items' append-only rule
-- held for this one change. On hash partitions rows move to the partition
-- of their new key.
DO $$
DECLARE
  fk record;
  t record;
BEGIN
  CREATE TEMP TABLE rekey_foreign_keys ON COMMIT DROP AS
    SELECT conrelid::regclass AS tbl, conname, pg_get_constraintdef(oid) AS def
      FROM pg_constraint
     WHERE contype = 'f' AND conparentid = 0 AND connamespace = 'public'::regnamespace;
  FOR fk IN SELECT * FROM rekey_foreign_keys LOOP
    EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', fk.tbl, fk.conname);
  END LOOP;
  CREATE TEMP TABLE rekey ON COMMIT DROP AS
    SELECT conv_key AS old_key, conversation_key(tenant_id, conversation_id) AS new_key
      FROM conversations;
  -- On partitions the rule is each partition's trigger.
  FOR t IN SELECT tgrelid::regclass AS tbl FROM pg_trigger WHERE tgname = 'items_append_only' LOOP
    EXECUTE format('ALTER TABLE %s DISABLE TRIGGER items_append_only', t.tbl);
  END LOOP;
  FOR t IN SELECT c.oid::regclass AS tbl
             FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'conv_key'
            WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
              AND NOT c.relispartition LOOP
    EXECUTE format('UPDATE %s x SET conv_key = r.new_key FROM rekey r '
                   'WHERE x.conv_key = r.old_key AND r.old_key <> r.new_key', t.tbl);
  END LOOP;
  FOR t IN SELECT tgrelid::regclass AS tbl FROM pg_trigger WHERE tgname = 'items_append_only' LOOP
    EXECUTE format('ALTER TABLE %s ENABLE TRIGGER items_append_only', t.tbl);
  END LOOP;
  FOR fk IN SELECT * FROM rekey_foreign_keys LOOP
    EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I %s', fk.tbl, fk.conname, fk.def);
  END LOOP;
END;
$$;

ALTER TABLE conversations DROP CONSTRAINT conversations_tenant_id_conversation_id_key;
-- Listing a tenant's conversations and its usage.
CREATE INDEX conversations_by_tenant ON conversations (tenant_id, conversation_id);
