"""Storage, emulated: moto in its own process, the template's resources created in it, a TTL reaper.

Emulates infra/constructs/storage.py (the jobs and idempotency tables, the payload bucket) and
every other construct's state: budgets.py's, realtime.py's and webhooks.py's tables, the
queues of worker.py, outbox.py and webhooks.py, the secrets, and auth.py's user pool and app
clients. moto (server mode) holds them all, created from the template's own properties
(outlast.local.provision). moto never expires items, so a reaper deletes those whose TTL
attribute has passed, as DynamoDB's TTL would (a scan under moto's one lock: not too often).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3

from outlast.local.capabilities.base import Log, Loops, remaining
from outlast.local.lambda_runtime import guarded, spawn
from outlast.local.process import free_port
from outlast.local.provision import LocalResources, Provisioner
from outlast.local.template import REGION, Resolver, Template


class Storage(Loops):
    """moto, the provisioned resources and the TTL reaper."""

    def __init__(self, logs: Path, reap_seconds: float, log: Log) -> None:
        super().__init__()
        self._logs = logs
        self._reap_seconds = reap_seconds
        self._log = log
        self.moto: subprocess.Popen[bytes] | None = None
        self.endpoint = ""
        self.resources = LocalResources()

    def start(self, template: Template, resolver: Resolver) -> Storage:
        """Start moto, create the template's resources in it, start the reaper."""
        self._start_moto()
        self.resources = Provisioner(template, resolver, self.endpoint).provision()
        self._start_reaper()
        return self

    def _start_moto(self) -> None:
        port = free_port()
        # Its output goes to a file: a pipe nobody reads would fill up and stall every AWS call.
        with (self._logs / "moto.log").open("w") as log:
            self.moto = spawn(
                lambda: subprocess.Popen(  # noqa: S603 - our own interpreter and module
                    guarded([sys.executable, "-m", "outlast.local.moto_server", "--port", str(port)]),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                )
            )
        self.endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while not _accepts(port):
            if self.moto.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"moto did not start; see {self._logs / 'moto.log'}")
            time.sleep(0.05)
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")

    def _start_reaper(self) -> None:
        dynamodb = boto3.client("dynamodb", endpoint_url=self.endpoint, region_name=REGION)
        tables = {
            self.resources.tables[lid]: attribute for lid, attribute in self.resources.table_ttl.items()
        }

        def reap() -> None:
            now = int(time.time())
            for table, attribute in tables.items():
                keys = [
                    k["AttributeName"] for k in dynamodb.describe_table(TableName=table)["Table"]["KeySchema"]
                ]
                paginator = dynamodb.get_paginator("scan")
                names = {"#ttl": attribute, **{f"#k{i}": key for i, key in enumerate(keys)}}
                pages = paginator.paginate(
                    TableName=table,
                    FilterExpression="#ttl < :now",
                    ProjectionExpression=", ".join(f"#k{i}" for i in range(len(keys))),
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues={":now": {"N": str(now)}},
                )
                for page in pages:
                    for item in page.get("Items", []):
                        dynamodb.delete_item(TableName=table, Key={k: item[k] for k in keys})

        self.run("ttl-reaper", reap, self._reap_seconds, self._log)

    def stop(self) -> None:
        if self.moto is not None and self.moto.poll() is None:
            self.moto.terminate()

    def join(self, deadline: float) -> None:
        super().join(deadline)
        if self.moto is None:
            return
        try:
            self.moto.wait(timeout=remaining(deadline))
        except subprocess.TimeoutExpired:
            self.moto.kill()
            self.moto.wait(timeout=5)


def _accepts(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0
