-- The tokenizer the conversation's stored counts were made with, so that a
-- model change (UpdateConversation) can have them recounted when a view
-- next needs them. Empty for older conversations: their counts are the
-- current model's.
ALTER TABLE conversations
  ADD COLUMN count_encoding text NOT NULL DEFAULT '',
  -- True once any count was made again: only then do reads look beside
  -- the items for counts.
  ADD COLUMN recounted boolean NOT NULL DEFAULT false;

-- Items stay append-only: counts made again with another tokenizer live
-- beside them, one row per item and tokenizer, and are read in place of
-- the item's own count while the conversation counts with that tokenizer.
CREATE TABLE item_token_counts (
  conv_key    bigint NOT NULL,
  sequence    bigint NOT NULL,
  encoding    text   NOT NULL,
  token_count bigint NOT NULL CHECK (token_count >= 0),
  PRIMARY KEY (conv_key, sequence, encoding),
  FOREIGN KEY (conv_key, sequence) REFERENCES items (conv_key, sequence) ON DELETE CASCADE
);
