-- Continuations are linked by the incarnation of their source, not by its
-- id alone: a conversation deleted and created again under the same id is
-- another conversation, and a redaction of it must not reach what was
-- carried from the one before (nor loop when the new one continues a
-- continuation of the old). Set when a conversation continues another;
-- NULL for those continued before it was kept (matched by id, as before,
-- with the walk bounded and each conversation visited once).
ALTER TABLE conversations ADD COLUMN continued_from_incarnation bigint;
