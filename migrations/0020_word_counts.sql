-- Recall's term statistics, kept rather than counted on every search: how
-- many of a conversation's indexed items (item_words, migrations/0019) hold
-- each word. Indexing words adds to the counts in the same statement;
-- erasing an item takes its words off them (storage/postgres_storage.cc,
-- index_words and redact_items). A search then looks each word's count up
-- by key, where it counted the word's postings before (most of what a
-- search cost, BENCHMARKS.md). Deleting a conversation deletes its counts.
CREATE TABLE word_counts (
  conv_key bigint NOT NULL REFERENCES conversations ON DELETE CASCADE,
  word     text   NOT NULL,
  items    bigint NOT NULL,
  PRIMARY KEY (conv_key, word)
);

-- The words indexed so far. A lexeme is "<conv_key>#<word>".
INSERT INTO word_counts (conv_key, word, items)
SELECT w.conv_key, substr(u.lexeme, strpos(u.lexeme, '#') + 1), count(*)
  FROM item_words w, unnest(w.search) u
 GROUP BY 1, 2;
