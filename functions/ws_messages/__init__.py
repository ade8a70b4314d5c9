"""The WebSocket API's `$default` route: `{"action": "ping"}` gets `{"type": "pong"}`."""
