-- Recovery after a provider refused a view as too long. From then on every
-- count of the conversation is scaled by overflow_correction, whatever the
-- tokenizer (token_correction, from usage reports, applies to approximate
-- counts only), and the prompt is kept under prompt_limit tokens (0: no
-- limit but the model's window). The first only grows, the second only
-- shrinks.
ALTER TABLE conversations
  ADD COLUMN overflow_correction double precision NOT NULL DEFAULT 1.0
    CHECK (overflow_correction >= 1.0),
  ADD COLUMN prompt_limit bigint NOT NULL DEFAULT 0
    CHECK (prompt_limit >= 0);
