"""The transaction coordinator (Kafka's transactional ids, `__transaction_state`, markers)."""
