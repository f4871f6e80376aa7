-- Forks share their source's items instead of copying them
-- (storage/postgres_forks.cc). A conversation reads its own items (rows
-- under its conv_key) and, through item_segments, the items of the
-- conversations it was forked from: each segment row says that `conv_key`
-- reads `owner_key`'s items from_sequence..through_sequence as its own. A
-- fork of a fork lists every owner directly (its source's segments clipped
-- to the fork point, then the source's own items through it), so a read
-- never walks a chain. A conversation with no segment row (every one
-- created, continued or forked before this migration: those forks hold
-- copies) reads its own rows only.
--
-- Segments change with the rows they name: a rewind moves the source's
-- items after its point to the abandoned fork and splits the segments
-- that named them; a deleted owner hands the items its readers share to
-- one of them first (copy on delete) and the others read them from it.
CREATE TABLE item_segments (
  conv_key         bigint NOT NULL REFERENCES conversations ON DELETE CASCADE,
  from_sequence    bigint NOT NULL CHECK (from_sequence > 0),
  through_sequence bigint NOT NULL,
  owner_key        bigint NOT NULL,
  -- The reader has these items at this version at the latest: a fork
  -- inside an append has that append's items through the fork point at
  -- the version it starts from, the one before the append.
  version_cap      bigint NOT NULL,
  PRIMARY KEY (conv_key, from_sequence),
  CHECK (from_sequence <= through_sequence),
  CHECK (owner_key <> conv_key)
);

-- Who reads an owner's items: a delete or a rewind of the owner finds its
-- readers by it.
CREATE INDEX item_segments_owner ON item_segments (owner_key);

-- A fork's pins, recounts and word index name the items it reads, which
-- are not all its own rows: they belong to the conversation, and go with
-- it (and with the items a rewind takes away, which it deletes itself).
DO $$
DECLARE
  fk record;
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['item_pins', 'item_token_counts', 'item_words'] LOOP
    FOR fk IN SELECT conname FROM pg_constraint
               WHERE conrelid = t::regclass AND contype = 'f'
                 AND confrelid = 'items'::regclass LOOP
      EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', t, fk.conname);
    END LOOP;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = t::regclass AND contype = 'f'
                      AND confrelid = 'conversations'::regclass) THEN
      EXECUTE format('ALTER TABLE %I ADD FOREIGN KEY (conv_key) REFERENCES conversations '
                     'ON DELETE CASCADE', t);
    END IF;
  END LOOP;
END $$;
