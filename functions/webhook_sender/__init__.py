"""The webhooks queue's consumer: one signed attempt per delivery message, retried through visibility."""
