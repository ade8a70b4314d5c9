"""The outlast HTTP API as a client sees it: its documents (generated from docs/openapi.json) and
one HTTP transport on the standard library. Nothing here prints, sleeps or retries."""
