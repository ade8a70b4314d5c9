"""Local mode's live-update pieces that need no socket: the notifier's filter, redaction, URL mapping."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from outlast.local.event_sources import matches
from outlast.local.template import Resolver, Resource, Template
from outlast.local.websocket_front import RequestAuthorizer, redact
from outlast.local.websocket_template import local_urls, localize

# The notifier's event source filter as infra.constructs.realtime renders it into the template.
NOTIFIER_FILTER = {
    "eventName": ["INSERT", "MODIFY"],
    "dynamodb": {
        "NewImage": {"type": {"S": ["job"]}, "w": {"S": [{"anything-but": ["defer", "heartbeat"]}]}}
    },
}


def _record(
    event_name: str = "MODIFY", item_type: str = "job", kind: str | None = "claim"
) -> dict[str, object]:
    image: dict[str, object] = {"type": {"S": item_type}, "jobId": {"S": "j"}}
    if kind is not None:
        image["w"] = {"S": kind}
    return {"eventName": event_name, "dynamodb": {"NewImage": image}}


class TestNotifierFilter:
    @pytest.mark.parametrize("kind", ["submit", "claim", "release", "terminal", "cancel", "bump", "redrive"])
    def test_visible_job_writes_pass(self, kind: str) -> None:
        assert matches(NOTIFIER_FILTER, _record(kind=kind))

    @pytest.mark.parametrize("kind", ["heartbeat", "defer"])
    def test_heartbeats_and_deferrals_are_dropped(self, kind: str) -> None:
        assert not matches(NOTIFIER_FILTER, _record(kind=kind))

    def test_an_insert_passes_and_a_remove_does_not(self) -> None:
        assert matches(NOTIFIER_FILTER, _record("INSERT", kind="submit"))
        assert not matches(NOTIFIER_FILTER, _record("REMOVE"))

    def test_inputs_and_results_are_dropped(self) -> None:
        assert not matches(NOTIFIER_FILTER, _record(item_type="input"))
        assert not matches(NOTIFIER_FILTER, _record(item_type="result"))

    def test_an_item_without_w_matches_nothing_as_in_lambda(self) -> None:
        assert not matches(NOTIFIER_FILTER, _record(kind=None))

    def test_anything_but_takes_a_single_value_too(self) -> None:
        assert matches({"a": [{"anything-but": "x"}]}, {"a": "y"})
        assert not matches({"a": [{"anything-but": "x"}]}, {"a": "x"})


class TestRedaction:
    @pytest.mark.parametrize(
        ("line", "expected"),
        [
            ("/ws?ticket=abc_DEF-123 403", "/ws?ticket=<redacted> 403"),
            ("/ws?x=1&ticket=abc&y=2", "/ws?x=1&ticket=<redacted>&y=2"),
            ("GET /ws?TICKET=abc", "GET /ws?TICKET=<redacted>"),
            ("/ws 401", "/ws 401"),
        ],
    )
    def test_ticket_values_never_reach_a_log_line(self, line: str, expected: str) -> None:
        assert redact(line) == expected


class TestIdentitySources:
    def test_a_missing_or_empty_query_parameter_is_no_identity(self) -> None:
        authorizer = RequestAuthorizer(
            invoke=lambda _event: None, identity_sources=("route.request.querystring.ticket",)
        )

        assert authorizer.identity_present({"ticket": "t"}, {})
        assert not authorizer.identity_present({"ticket": ""}, {})
        assert not authorizer.identity_present({}, {"ticket": "t"})


class TestStageUrls:
    def test_the_aws_form_stage_urls_resolve_to_the_local_front_and_management_api(self) -> None:
        resolver = Resolver(Template(path=Path("t.json"), body={"Resources": {}}), refs={"WsApi": "WsApi"})
        api = Resource("WsApi", "AWS::ApiGatewayV2::Api", {"ProtocolType": "WEBSOCKET"}, {})

        urls = local_urls(resolver, api, "live", "ws://127.0.0.1:9001/ws", "http://127.0.0.1:9002/ws")

        assert (
            localize("wss://WsApi.execute-api.us-east-1.amazonaws.com/live", urls) == "ws://127.0.0.1:9001/ws"
        )
        assert (
            localize("https://WsApi.execute-api.us-east-1.amazonaws.com/live", urls)
            == "http://127.0.0.1:9002/ws"
        )
        assert localize("https://WsApi.execute-api.us-east-1.amazonaws.com/lively", urls).endswith("/lively")
        assert localize("some-table-name", copy.deepcopy(urls)) == "some-table-name"
