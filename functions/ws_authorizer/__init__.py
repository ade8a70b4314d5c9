"""The WebSocket API's `$connect` REQUEST authorizer: one ticket, one connect."""
