-- A conversation started from another one's state (CreateConversation
-- continue_from): which one. The chunks carried over record their source
-- in summary_chunks.structure.
ALTER TABLE conversations
  ADD COLUMN continued_from text NOT NULL DEFAULT '';
