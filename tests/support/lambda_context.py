"""A Lambda context with the fields Powertools reads, and a clock for the remaining time."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field


@dataclass
class FakeLambdaContext:
    """Stands in for the context the Lambda runtime passes."""

    function_name: str = "outlast-test"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:outlast-test"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    timeout_seconds: float = 30.0
    started: float = field(default_factory=time.monotonic)

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the (pretend) timeout."""
        return max(0, int((self.timeout_seconds - (time.monotonic() - self.started)) * 1000))
