"""On-call tooling: DLQ listing and redrive, and the operator's view of one job.

Operator commands talk to AWS directly with the operator's own credentials (boto3), never through
the public HTTP API: they see internals (leases, storage locations) that no caller may see. They
reuse the functions' adapters (shared.adapters), so the DynamoDB mapping lives in one place.
"""
