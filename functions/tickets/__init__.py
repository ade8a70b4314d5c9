"""POST /v1/realtime/tickets: a single-use ticket for one WebSocket connect."""
