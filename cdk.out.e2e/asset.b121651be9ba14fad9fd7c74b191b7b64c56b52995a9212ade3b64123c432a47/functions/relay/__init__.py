"""DynamoDB stream -> SQS: the outbox relay that dispatches newly accepted jobs."""
