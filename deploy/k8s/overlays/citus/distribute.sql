-- Distributes convstate's tables by conversation on the coordinator, once:
-- tables already distributed are left alone.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'conversations'::regclass) THEN
    PERFORM create_distributed_table('conversations', 'conv_key');
    PERFORM create_distributed_table(t::regclass, 'conv_key', colocate_with => 'conversations')
      FROM unnest(ARRAY['items', 'summary_chunks', 'compaction_events', 'idempotency_keys',
                        'provider_usage', 'item_pins', 'item_token_counts', 'view_states',
                        'compaction_proposals']) t;
    PERFORM create_distributed_table('tenant_usage', 'tenant_id');
  END IF;
END
$$;
