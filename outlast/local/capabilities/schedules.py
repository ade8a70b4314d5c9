"""Schedules, emulated: each enabled EventBridge rule invokes its function targets on its rate.

Emulates the AWS::Events::Rule resources the constructs make (sweeper.py's sweep schedule,
batch.py's poll schedule, and any other rule with a ScheduleExpression): a `rate(N unit)` runs
every N units, a cron expression once a minute, and `outlast local up --schedule-seconds` overrides both.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from outlast.local.capabilities.base import Log, Loops
from outlast.local.capabilities.functions import Functions
from outlast.local.event_sources import scheduled_event
from outlast.local.template import Resolver, Template


class Schedules(Loops):
    """A loop per rule target."""

    def __init__(self, every_seconds: float | None, log: Log) -> None:
        super().__init__()
        self._every_seconds = every_seconds
        self._log = log
        self.scheduled: list[str] = []  # the ARNs of the functions a rule invokes

    def start(self, template: Template, resolver: Resolver, functions: Functions) -> Schedules:
        """Invoke every enabled rule's function targets on its schedule (the first run at once)."""
        for resource in template.resources("AWS::Events::Rule"):
            properties = resolver.resolve(resource.properties)
            if "ScheduleExpression" not in properties or properties.get("State", "ENABLED") != "ENABLED":
                continue
            every = self._every_seconds or rate_seconds(str(properties["ScheduleExpression"]))
            for target in properties.get("Targets", []):
                arn = str(target["Arn"])
                if arn not in functions.pools:
                    continue
                self.scheduled.append(arn)
                name = f"{resource.logical_id}-schedule"
                self.run(name, _scheduled(functions.invoker(arn)), every, self._log)
        return self


def rate_seconds(expression: str) -> float:
    """How often a schedule expression runs: a rate's period, or once a minute for a cron."""
    found = re.fullmatch(r"rate\((\d+)\s+(minute|minutes|hour|hours|day|days)\)", expression.strip())
    if not found:
        return 60.0  # a cron expression: locally, once a minute
    unit = {"minute": 60, "hour": 3600, "day": 86400}[found.group(2).rstrip("s")]
    return int(found.group(1)) * unit


def _scheduled(invoke: Callable[[dict[str, Any]], Any]) -> Callable[[], Any]:
    return lambda: invoke(scheduled_event())
