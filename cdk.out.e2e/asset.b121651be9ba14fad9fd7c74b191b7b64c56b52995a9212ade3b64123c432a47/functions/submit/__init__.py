"""POST /v1/jobs: validate, claim the idempotency key, persist the job, answer 202."""
