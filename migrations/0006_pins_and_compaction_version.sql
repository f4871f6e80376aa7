-- Two changes that keep a gateway's optimistic concurrency about appends
-- only, and let it pin items after the fact.
--
-- `version` now moves with appends alone (what `expected_version` compares);
-- `compaction_version` moves with every change to the view that is not an
-- append: compactions, pins.
ALTER TABLE conversations
  ADD COLUMN compaction_version bigint NOT NULL DEFAULT 0;

-- Pins set after an item was appended (PinItem / UnpinItem). Items stay
-- append-only: the pin is state beside them, and it overrides the flag the
-- item was appended with.
CREATE TABLE item_pins (
  conv_key   bigint      NOT NULL,
  sequence   bigint      NOT NULL,
  pinned     boolean     NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (conv_key, sequence),
  FOREIGN KEY (conv_key, sequence) REFERENCES items (conv_key, sequence) ON DELETE CASCADE
);
