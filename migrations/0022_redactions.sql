-- How many erasures (RedactItems) reached a conversation's items: a
-- replica that keeps a copy of the history to recall from compares it
-- before answering, and reads the history again when it moved (an erasure
-- made on another replica reaches it this way).
ALTER TABLE conversations ADD COLUMN redactions bigint NOT NULL DEFAULT 0;
