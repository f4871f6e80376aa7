-- Tenants' limits (max_stored_bytes): each conversation keeps the bytes of
-- the content its clients appended, updated by every append in the same
-- statement as its item count.
ALTER TABLE conversations
  ADD COLUMN content_bytes bigint NOT NULL DEFAULT 0;

UPDATE conversations c
   SET content_bytes = s.bytes
  FROM (SELECT conv_key, sum(octet_length(content)) AS bytes
          FROM items
         WHERE kind <> 'summary_marker'
         GROUP BY conv_key) s
 WHERE s.conv_key = c.conv_key;
