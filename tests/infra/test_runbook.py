"""docs/runbook.md against the alarms: every alarm description's link lands on a section."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infra.names import Runbook
from tests.infra.conftest import Synthesized

pytestmark = pytest.mark.infra

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK = ROOT / "docs" / "runbook.md"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.strip().lower()).replace(" ", "-")


def _anchors() -> set[str]:
    return {
        _slug(line.lstrip("#")) for line in RUNBOOK.read_text().splitlines() if re.match(r"#{1,6} ", line)
    }


def test_every_runbook_anchor_the_alarms_use_is_a_section() -> None:
    assert {anchor.value for anchor in Runbook} <= _anchors()


def test_every_alarm_description_links_one_section(synthesized: Synthesized) -> None:
    alarms = synthesized.of_type("AWS::CloudWatch::Alarm")
    assert alarms
    for alarm in alarms.values():
        links = re.findall(r"docs/runbook\.md#([a-z0-9-]+)", alarm["Properties"]["AlarmDescription"])
        assert len(links) == 1, alarm["Properties"]["AlarmDescription"]
        assert links[0] in _anchors(), links[0]


def test_the_runbooks_own_links_resolve() -> None:
    targets = set(re.findall(r"\]\(#([a-z0-9-]+)\)", RUNBOOK.read_text()))
    assert targets
    assert targets <= _anchors()
