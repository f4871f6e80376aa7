-- The word index of recall (0016) moves off the append. Maintaining it
-- was most of what PostgreSQL spent on an append: the GIN insert of every
-- item's words, and the merges of the index's pending list that whichever
-- insert found it full paid for (BENCHMARKS.md, "Where an append's time
-- goes now"). Yet recall looks for what left the view, and the items still
-- in the view are a bounded tail.
--
-- An item's words (items.search) are still stored as it is appended, but
-- indexed only once a compaction has taken the view past it: item_words
-- holds the words of every searchable item (no summary marker, nothing
-- redacted) at or before the conversation's words_indexed_through, and
-- nothing after it. A search reads the index up to that sequence and the
-- items after it by primary key, so it still sees the whole history. The
-- compaction's commit indexes what it took out of the view, in a
-- transaction of its own (storage/postgres_storage.cc, IndexWords); the
-- sequence only moves forward, and a revert leaves it where it is.
ALTER TABLE conversations ADD COLUMN words_indexed_through bigint NOT NULL DEFAULT 0;

CREATE TABLE item_words (
  conv_key bigint   NOT NULL,
  sequence bigint   NOT NULL,
  search   tsvector NOT NULL,
  PRIMARY KEY (conv_key, sequence),
  FOREIGN KEY (conv_key, sequence) REFERENCES items (conv_key, sequence) ON DELETE CASCADE
);

-- What was compacted so far is indexed now; the rest when its compaction
-- comes.
UPDATE conversations SET words_indexed_through = greatest(summarized_through, prune_boundary)
 WHERE greatest(summarized_through, prune_boundary) > 0;
INSERT INTO item_words (conv_key, sequence, search)
SELECT i.conv_key, i.sequence, i.search
  FROM items i JOIN conversations c ON c.conv_key = i.conv_key
 WHERE i.sequence <= c.words_indexed_through AND i.search IS NOT NULL
   AND i.kind <> 'summary_marker' AND i.redacted_digest IS NULL;

-- As 0016's: each lexeme names its conversation, so a search reads the
-- postings of one conversation only.
CREATE INDEX item_words_search ON item_words USING gin (search);
-- items_search, under whatever name the layout of hash partitions gave it.
DO $$
DECLARE
  ix regclass;
BEGIN
  FOR ix IN SELECT x.indexrelid::regclass FROM pg_index x
              JOIN pg_class c ON c.oid = x.indexrelid JOIN pg_am a ON a.oid = c.relam
             WHERE x.indrelid = 'items'::regclass AND a.amname = 'gin' LOOP
    EXECUTE format('DROP INDEX %s', ix);
  END LOOP;
END $$;
