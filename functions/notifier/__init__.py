"""The jobs stream's second consumer: each job write, pushed to its owner's WebSocket connections."""
