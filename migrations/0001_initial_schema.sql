-- The conversation log, summaries, compaction audit and idempotency keys.
-- Every table below `conversations` is keyed by `conv_key` first, so the
-- schema can be hash-partitioned or distributed by conversation.

CREATE TABLE conversations (
  conv_key            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tenant_id           text        NOT NULL,
  conversation_id     text        NOT NULL,
  model               text        NOT NULL,
  system_prompt       text        NOT NULL DEFAULT '',
  pinned_instructions text        NOT NULL DEFAULT '',
  metadata            jsonb       NOT NULL DEFAULT '{}',
  profile_overrides   jsonb       NOT NULL DEFAULT '{}',
  -- Bumped by every append and compaction.
  version             bigint      NOT NULL DEFAULT 0,
  item_count          bigint      NOT NULL DEFAULT 0,
  last_sequence       bigint      NOT NULL DEFAULT 0,
  last_turn_index     bigint      NOT NULL DEFAULT 0,
  -- Sequence of the latest summary marker: the model's view starts after it.
  marker_sequence     bigint      NOT NULL DEFAULT 0,
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant_id, conversation_id)
);

-- The append-only log. Rows are never updated; they go only when their
-- conversation is deleted.
CREATE TABLE items (
  conv_key         bigint      NOT NULL REFERENCES conversations ON DELETE CASCADE,
  sequence         bigint      NOT NULL CHECK (sequence > 0),
  turn_index       bigint      NOT NULL CHECK (turn_index >= 0),
  role             text        NOT NULL
                   CHECK (role IN ('system', 'user', 'assistant', 'tool')),
  kind             text        NOT NULL
                   CHECK (kind IN ('message', 'tool_call', 'tool_result',
                                   'reasoning', 'summary_marker')),
  content          text        NOT NULL,
  tool_name        text        NOT NULL DEFAULT '',
  tool_call_id     text        NOT NULL DEFAULT '',
  pinned           boolean     NOT NULL DEFAULT false,
  metadata         jsonb       NOT NULL DEFAULT '{}',
  token_count      bigint      NOT NULL CHECK (token_count >= 0),
  summary_chunk_id bigint,
  created_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (conv_key, sequence)
);

CREATE INDEX items_pinned ON items (conv_key, sequence) WHERE pinned;

CREATE FUNCTION items_are_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'items are append-only';
END;
$$;

CREATE TRIGGER items_append_only BEFORE UPDATE ON items
  FOR EACH ROW EXECUTE FUNCTION items_are_append_only();

-- Summaries that replace ranges of items in the model's view. Additive: a
-- fold supersedes chunks (superseded_by) but keeps them.
CREATE TABLE summary_chunks (
  conv_key         bigint      NOT NULL REFERENCES conversations ON DELETE CASCADE,
  chunk_id         bigint      NOT NULL CHECK (chunk_id > 0),
  from_sequence    bigint      NOT NULL,
  through_sequence bigint      NOT NULL,
  text             text        NOT NULL,
  token_count      bigint      NOT NULL CHECK (token_count >= 0),
  summarizer_model text        NOT NULL,
  prompt_version   text        NOT NULL,
  tokens_in        bigint      NOT NULL DEFAULT 0,
  tokens_out       bigint      NOT NULL DEFAULT 0,
  latency_ms       bigint      NOT NULL DEFAULT 0,
  superseded_by    bigint,
  created_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (conv_key, chunk_id),
  CHECK (from_sequence <= through_sequence)
);

-- Audit trail of every compaction step.
CREATE TABLE compaction_events (
  conv_key      bigint      NOT NULL REFERENCES conversations ON DELETE CASCADE,
  event_id      bigint      GENERATED ALWAYS AS IDENTITY,
  event         text        NOT NULL,
  tier          text        NOT NULL DEFAULT '',
  tokens_before bigint      NOT NULL DEFAULT 0,
  tokens_after  bigint      NOT NULL DEFAULT 0,
  detail        jsonb       NOT NULL DEFAULT '{}',
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (conv_key, event_id)
);

-- The answer to every AppendTurn that carried an idempotency key.
CREATE TABLE idempotency_keys (
  conv_key            bigint      NOT NULL REFERENCES conversations ON DELETE CASCADE,
  idempotency_key     text        NOT NULL,
  request_fingerprint text        NOT NULL,
  first_sequence      bigint      NOT NULL,
  last_sequence       bigint      NOT NULL,
  version             bigint      NOT NULL,
  created_at          timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (conv_key, idempotency_key)
);
