-- Recall from the whole history: every item is searchable by the words
-- SearchTerms (storage/contract.h) splits it into, the same split in SQL:
-- lowercase runs of ASCII letters and digits, and words joined by '-', '.',
-- '/', ':', '_' or '@' kept whole beside their parts (hosts, paths, ids).
-- Only the first 65,536 characters of an item are indexed. A redacted
-- item's content is gone, and so are its words: the column follows the
-- content it is generated from. Summary markers are never searched.
--
-- The index leads with the conversation (btree_gin), so a search reads the
-- postings of one conversation only, whatever the size of the table. It
-- leads with the expression conv_key + 0, which searches name and the
-- primary key cannot serve: the planner's estimate of one conversation's
-- rows is an average, and for a conversation of thousands of items a scan
-- of its primary-key range filtered by words costs a hundred times the
-- index.
CREATE EXTENSION IF NOT EXISTS btree_gin;

CREATE FUNCTION search_terms(t text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
  SELECT array_to_tsvector(coalesce(array_agg(DISTINCT w), '{}'))
    FROM (SELECT unnest(regexp_split_to_array(lower(left(t, 65536)), '[^a-z0-9]+')) AS w
          UNION ALL
          SELECT m[1]
            FROM regexp_matches(lower(left(t, 65536)),
                                '([a-z0-9]+(?:[-./:_@][a-z0-9]+)+)', 'g') AS m) x
   WHERE w <> '' AND length(w) <= 200
$$;

ALTER TABLE items ADD COLUMN search tsvector
  GENERATED ALWAYS AS (search_terms(content)) STORED;

CREATE INDEX items_search ON items USING gin ((conv_key + 0), search)
  WHERE kind <> 'summary_marker' AND redacted_digest IS NULL;
