"""The ingest function: S3 upload events (through SQS) -> a document's text, Ready or Rejected."""
