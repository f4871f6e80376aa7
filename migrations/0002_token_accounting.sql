-- Token accounting: counts computed once and stored, and the provider's own
-- counts, used to correct approximate tokenizers per conversation.

ALTER TABLE conversations
  -- Counted once, at creation, with the conversation's tokenizer.
  ADD COLUMN system_prompt_tokens       bigint NOT NULL DEFAULT 0,
  ADD COLUMN pinned_instructions_tokens bigint NOT NULL DEFAULT 0,
  -- Sum of token_count over all items (raw, before correction).
  ADD COLUMN item_tokens                bigint NOT NULL DEFAULT 0,
  -- Provider tokens per estimated token (1 for exact tokenizers); learnt
  -- from reported usage.
  ADD COLUMN token_correction           double precision NOT NULL DEFAULT 1.0
    CHECK (token_correction > 0);

-- Every usage report a gateway sent with AppendTurn, next to what convstate
-- estimated for the same prompt.
CREATE TABLE provider_usage (
  conv_key            bigint      NOT NULL REFERENCES conversations ON DELETE CASCADE,
  sequence            bigint      NOT NULL,
  input_tokens        bigint      NOT NULL,
  output_tokens       bigint      NOT NULL,
  cached_input_tokens bigint      NOT NULL,
  reasoning_tokens    bigint      NOT NULL,
  estimated_input     bigint      NOT NULL,
  correction_after    double precision NOT NULL,
  created_at          timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (conv_key, sequence)
);
