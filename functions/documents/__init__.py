"""The documents API: POST/GET /v1/documents, GET/DELETE /v1/documents/{id} (owner only)."""
