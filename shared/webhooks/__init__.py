"""Webhooks for backends: Standard Webhooks signing, event ids and the egress guard (all pure)."""
