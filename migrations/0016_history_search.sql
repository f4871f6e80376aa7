-- Recall from the whole history: every item is searchable by the words
-- SearchTerms (storage/contract.h) splits it into, the same split in SQL:
-- lowercase runs of ASCII letters and digits, and words joined by '-', '.',
-- '/', ':', '_' or '@' kept whole beside their parts (hosts, paths, ids).
-- Only the first 65,536 characters of an item are indexed. A redacted
-- item's content is gone, and so are its words: the column follows the
-- content it is generated from. Summary markers are never searched.
--
-- Each word is indexed under its conversation: the lexeme is the
-- conversation's key, '#', and the word (SearchTerms never yields '#'). A
-- search then reads the postings of one conversation only, however large
-- the table and however common the word elsewhere; a plain GIN index over
-- (conv_key, search) would intersect a word's postings over every
-- conversation with the conversation's. Statements still name conv_key,
-- for partition pruning and Citus routing.
CREATE FUNCTION search_terms(k bigint, t text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
  SELECT array_to_tsvector(coalesce(array_agg(DISTINCT k::text || '#' || w), '{}'))
    FROM (SELECT unnest(regexp_split_to_array(lower(left(t, 65536)), '[^a-z0-9]+')) AS w
          UNION ALL
          SELECT m[1]
            FROM regexp_matches(lower(left(t, 65536)),
                                '([a-z0-9]+(?:[-./:_@][a-z0-9]+)+)', 'g') AS m) x
   WHERE w <> '' AND length(w) <= 200
$$;

ALTER TABLE items ADD COLUMN search tsvector
  GENERATED ALWAYS AS (search_terms(conv_key, content)) STORED;

CREATE INDEX items_search ON items USING gin (search)
  WHERE kind <> 'summary_marker' AND redacted_digest IS NULL;
