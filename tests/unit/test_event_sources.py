"""matches(): Lambda event filtering as the local event source mappings apply it.

The semantics are those of Lambda's filter rule syntax (the EventBridge pattern subset):
an object pattern matches when every key it names matches, a list is a set of alternatives,
`prefix` matches the start of a string, `exists` tests for the presence of a leaf.
"""

from __future__ import annotations

from typing import Any

import pytest

from outlast.local.event_sources import matches

JOB_INSERT = {
    "eventName": "INSERT",
    "eventSource": "aws:dynamodb",
    "dynamodb": {
        "SequenceNumber": "100",
        "NewImage": {"type": {"S": "job"}, "jobId": {"S": "0b9e4c36-5d55-4a8b-9a11-8f1b7f3f1c2e"}},
    },
}
# The relay's filter, as infra/constructs/outbox.py declares it.
RELAY_FILTER = {"eventName": ["INSERT"], "dynamodb": {"NewImage": {"type": {"S": ["job"]}}}}


def changed(path: list[str], value: Any) -> dict[str, Any]:
    """JOB_INSERT with the leaf at `path` replaced (a deep copy along the path)."""
    record: dict[str, Any] = {**JOB_INSERT}
    node = record
    for key in path[:-1]:
        node[key] = {**node[key]}
        node = node[key]
    node[path[-1]] = value
    return record


class TestNestedPatterns:
    def test_the_relay_filter_lets_a_job_insert_through(self) -> None:
        assert matches(RELAY_FILTER, JOB_INSERT)

    @pytest.mark.parametrize(
        ("path", "value"),
        [
            pytest.param(["eventName"], "MODIFY", id="modify"),
            pytest.param(["eventName"], "REMOVE", id="remove"),
            pytest.param(["dynamodb", "NewImage", "type"], {"S": "input"}, id="input-item"),
            pytest.param(["dynamodb", "NewImage", "type"], {"N": "1"}, id="type-of-another-kind"),
            pytest.param(["dynamodb", "NewImage"], {}, id="no-type-attribute"),
            pytest.param(["dynamodb"], {"SequenceNumber": "100"}, id="no-new-image"),
        ],
    )
    def test_the_relay_filter_drops_everything_else(self, path: list[str], value: Any) -> None:
        assert not matches(RELAY_FILTER, changed(path, value))

    def test_keys_the_pattern_does_not_name_are_ignored(self) -> None:
        assert matches({"eventSource": ["aws:dynamodb"]}, JOB_INSERT)

    def test_an_empty_pattern_matches_any_object(self) -> None:
        assert matches({}, JOB_INSERT)

    def test_an_object_pattern_never_matches_a_leaf(self) -> None:
        assert not matches({"S": ["job"]}, "job")
        assert not matches({"eventName": {"S": ["INSERT"]}}, JOB_INSERT)

    def test_a_missing_key_does_not_match(self) -> None:
        assert not matches({"userIdentity": ["Service"]}, JOB_INSERT)


class TestLists:
    @pytest.mark.parametrize("event_name", ["INSERT", "MODIFY"])
    def test_a_list_is_a_set_of_alternatives(self, event_name: str) -> None:
        assert matches({"eventName": ["INSERT", "MODIFY"]}, changed(["eventName"], event_name))

    def test_a_value_in_no_alternative_does_not_match(self) -> None:
        assert not matches({"eventName": ["INSERT", "MODIFY"]}, changed(["eventName"], "REMOVE"))

    def test_an_empty_list_matches_nothing(self) -> None:
        assert not matches({"eventName": []}, JOB_INSERT)

    def test_matching_is_exact_and_case_sensitive(self) -> None:
        assert not matches({"eventName": ["insert"]}, JOB_INSERT)
        assert not matches({"eventName": ["INS"]}, JOB_INSERT)

    def test_numbers_and_strings_are_different_values(self) -> None:
        assert matches({"size": [5]}, {"size": 5})
        assert not matches({"size": ["5"]}, {"size": 5})

    def test_alternatives_can_mix_values_and_operators(self) -> None:
        pattern = {"eventName": ["MODIFY", {"prefix": "INS"}]}

        assert matches(pattern, JOB_INSERT)
        assert matches(pattern, changed(["eventName"], "MODIFY"))
        assert not matches(pattern, changed(["eventName"], "REMOVE"))


class TestPrefix:
    def test_a_prefix_matches_the_start_of_a_string(self) -> None:
        assert matches({"eventSource": [{"prefix": "aws:"}]}, JOB_INSERT)

    def test_a_prefix_elsewhere_in_the_string_does_not_match(self) -> None:
        assert not matches({"eventSource": [{"prefix": "dynamodb"}]}, JOB_INSERT)

    def test_the_whole_string_is_its_own_prefix(self) -> None:
        assert matches({"eventName": [{"prefix": "INSERT"}]}, JOB_INSERT)

    def test_a_prefix_never_matches_a_non_string(self) -> None:
        assert not matches({"size": [{"prefix": "1"}]}, {"size": 12})
        assert not matches({"size": [{"prefix": "1"}]}, {"size": None})

    def test_a_prefix_in_a_nested_pattern(self) -> None:
        pattern = {"dynamodb": {"NewImage": {"jobId": {"S": [{"prefix": "0b9e"}]}}}}

        assert matches(pattern, JOB_INSERT)
        assert not matches(pattern, changed(["dynamodb", "NewImage", "jobId"], {"S": "ffff"}))


class TestExists:
    def test_exists_true_matches_a_present_leaf(self) -> None:
        assert matches({"dynamodb": {"SequenceNumber": [{"exists": True}]}}, JOB_INSERT)

    def test_exists_true_does_not_match_an_absent_key(self) -> None:
        assert not matches({"userIdentity": [{"exists": True}]}, JOB_INSERT)

    def test_exists_false_does_not_match_a_present_leaf(self) -> None:
        assert not matches({"eventName": [{"exists": False}]}, JOB_INSERT)

    def test_exists_false_matches_an_absent_key(self) -> None:
        # Lambda's "does not exist" rule (docs: "ProductName": [{"exists": false}] matches records
        # without ProductName). The typical use skips TTL deletes, which carry a userIdentity.
        assert matches({"userIdentity": [{"exists": False}]}, JOB_INSERT)
        assert matches({"dynamodb": {"NewImage": {"errorCode": [{"exists": False}]}}}, JOB_INSERT)
