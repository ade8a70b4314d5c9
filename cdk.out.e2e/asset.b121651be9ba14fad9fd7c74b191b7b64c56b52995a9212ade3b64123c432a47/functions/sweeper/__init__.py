"""Scheduled recovery: lost dispatches, expired leases, stuck cancellations."""
