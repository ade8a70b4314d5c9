"""The WebSocket API's `follow` and `unfollow` routes: a connection follows a job's streamed output."""
