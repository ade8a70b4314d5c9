"""The WebSocket API's `$connect` and `$disconnect` routes: the owner's connections, at most 10."""
