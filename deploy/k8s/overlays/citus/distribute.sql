-- Distributes convstate's tables by conversation on the coordinator, once
-- each: tables already distributed are left alone, so that running it
-- again after an upgrade distributes the tables later migrations added.
-- Every table but the migrator's own bookkeeping is here
-- (//tests:distribution_rules_test holds this list to the schema).
DO $$
DECLARE
  t text;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'conversations'::regclass) THEN
    PERFORM create_distributed_table('conversations', 'conv_key');
  END IF;
  FOREACH t IN ARRAY ARRAY['items', 'summary_chunks', 'compaction_events', 'idempotency_keys',
                           'provider_usage', 'item_pins', 'item_token_counts', 'view_states',
                           'compaction_proposals', 'item_words', 'word_counts',
                           'item_segments'] LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = t::regclass) THEN
      PERFORM create_distributed_table(t::regclass, 'conv_key', colocate_with => 'conversations');
    END IF;
  END LOOP;
  IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'tenant_usage'::regclass) THEN
    PERFORM create_distributed_table('tenant_usage', 'tenant_id');
  END IF;
END
$$;
