"""Test-wide settings: fake AWS credentials and Powertools quiet, before anything imports boto3."""

from __future__ import annotations

import os

# Never reach a real AWS account from a test, whatever the developer's shell holds.
for variable in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
    os.environ.pop(variable, None)
os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "POWERTOOLS_SERVICE_NAME": "outlast-test",
        "POWERTOOLS_METRICS_NAMESPACE": "outlast-test",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "POWERTOOLS_DEV": "false",
    }
)
