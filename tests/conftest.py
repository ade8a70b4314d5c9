"""Test-wide settings: fake AWS credentials and Powertools quiet, before anything imports boto3."""

from __future__ import annotations

import os

import pytest

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

# The command line's own state (profiles, sign-ins) lives in a directory of each test's own, never
# in the developer's ~/.config; and never in the OS keyring.
for variable in ("OUTLAST_TOKEN", "OUTLAST_API_URL", "OUTLAST_PROFILE"):
    os.environ.pop(variable, None)
os.environ["OUTLAST_KEYRING"] = "0"


@pytest.fixture(autouse=True)
def _cli_config_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OUTLAST_CONFIG_DIR", str(tmp_path_factory.mktemp("outlast-config")))
