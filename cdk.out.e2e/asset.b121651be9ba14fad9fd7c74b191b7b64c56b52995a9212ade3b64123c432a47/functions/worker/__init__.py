"""SQS -> model: claims each job atomically, calls the model, records a terminal state."""
