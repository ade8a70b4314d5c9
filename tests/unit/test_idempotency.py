"""Idempotency keys as the client meant them, their scope, and the fingerprint of a request."""

from __future__ import annotations

import json
import string
from typing import Any

import pytest

from shared.contract import SubmitRequest
from shared.errors import InvalidIdempotencyKeyError, MissingIdempotencyKeyError
from shared.idempotency import fingerprint, parse_idempotency_key, scope_hash
from shared.job import Caller

VISIBLE_ASCII = "".join(chr(code) for code in range(0x21, 0x7F))


def parse(raw_json: str) -> SubmitRequest:
    return SubmitRequest.model_validate(json.loads(raw_json))


def fingerprint_of(body: dict[str, Any]) -> str:
    return fingerprint(parse(json.dumps(body)).client_fields())


class TestParseIdempotencyKey:
    @pytest.mark.parametrize("raw", [None, ""])
    def test_a_missing_or_empty_key_is_missing(self, raw: str | None) -> None:
        with pytest.raises(MissingIdempotencyKeyError):
            parse_idempotency_key(raw)

    @pytest.mark.parametrize("key", ["a", "x" * 255, VISIBLE_ASCII, "order-42:retry#1", "8f14e45f-ceea"])
    def test_visible_ascii_keys_of_1_to_255_characters_are_accepted_as_is(self, key: str) -> None:
        assert parse_idempotency_key(key) == key

    def test_a_key_of_256_characters_is_invalid(self) -> None:
        with pytest.raises(InvalidIdempotencyKeyError):
            parse_idempotency_key("x" * 256)

    def test_the_255_character_limit_applies_inside_the_quotes(self) -> None:
        assert parse_idempotency_key('"' + "x" * 255 + '"') == "x" * 255
        with pytest.raises(InvalidIdempotencyKeyError):
            parse_idempotency_key('"' + "x" * 256 + '"')

    @pytest.mark.parametrize(
        ("raw", "key"),
        [('"abc"', "abc"), ('""abc""', '"abc"'), ('"abc', '"abc'), ('abc"', 'abc"'), ('a"b', 'a"b')],
        ids=["one pair", "only one pair", "opening only", "closing only", "inside"],
    )
    def test_exactly_one_pair_of_surrounding_double_quotes_is_stripped(self, raw: str, key: str) -> None:
        assert parse_idempotency_key(raw) == key

    def test_a_pair_of_quotes_around_nothing_is_invalid(self) -> None:
        with pytest.raises(InvalidIdempotencyKeyError):
            parse_idempotency_key('""')

    @pytest.mark.parametrize(
        "raw",
        [
            "a b",
            " abc",
            "abc ",
            "a\tb",
            "a\x7fb",
            "a\x00b",
            "a\x1bb",
            "\nabc",
            "abc\n",
            "abc\r\n",
            "clé",
            "ключ",
            "key😀",
            '" abc"',
        ],
        ids=[
            "space",
            "leading space",
            "trailing space",
            "tab",
            "DEL",
            "NUL",
            "ESC",
            "leading newline",
            "trailing newline",
            "trailing CRLF",
            "latin-1",
            "cyrillic",
            "emoji",
            "space inside quotes",
        ],
    )
    def test_anything_but_visible_ascii_is_invalid(self, raw: str) -> None:
        with pytest.raises(InvalidIdempotencyKeyError):
            parse_idempotency_key(raw)

    @pytest.mark.parametrize("character", [c for c in map(chr, range(0x80)) if c not in VISIBLE_ASCII])
    def test_every_ascii_character_outside_0x21_to_0x7e_is_invalid(self, character: str) -> None:
        with pytest.raises(InvalidIdempotencyKeyError):
            parse_idempotency_key(f"ke{character}y")

    def test_the_error_detail_does_not_echo_the_key(self) -> None:
        with pytest.raises(InvalidIdempotencyKeyError) as caught:
            parse_idempotency_key("secret key")

        assert "secret" not in caught.value.detail


class TestScopeHash:
    alice = Caller(tenant="acme", sub="alice")

    def test_is_stable_for_the_same_caller_and_key(self) -> None:
        assert scope_hash(self.alice, "k") == scope_hash(Caller(tenant="acme", sub="alice"), "k")

    @pytest.mark.parametrize(
        ("caller", "key"),
        [
            (Caller(tenant="globex", sub="alice"), "k"),
            (Caller(tenant="acme", sub="bob"), "k"),
            (Caller(tenant="user:alice", sub="alice"), "k"),
            (alice, "k2"),
        ],
        ids=["other tenant", "other sub", "personal tenant", "other key"],
    )
    def test_differs_per_tenant_sub_and_key(self, caller: Caller, key: str) -> None:
        assert scope_hash(caller, key) != scope_hash(self.alice, "k")

    def test_parts_cannot_run_together(self) -> None:
        assert scope_hash(Caller(tenant="ab", sub="c"), "k") != scope_hash(Caller(tenant="a", sub="bc"), "k")
        assert scope_hash(Caller(tenant="a", sub="b"), "ck") != scope_hash(Caller(tenant="a", sub="bc"), "k")

    def test_is_a_sha256_hex_digest(self) -> None:
        digest = scope_hash(self.alice, "k")

        assert len(digest) == 64
        assert set(digest) <= set(string.hexdigits.lower())


class TestFingerprint:
    def test_client_fields_are_exactly_what_the_client_sent(self) -> None:
        body = {
            "operation": "classify",
            "input": {"text": "Win a cruise"},
            "options": {"labels": ["spam", "ham"], "maxOutputTokens": 3},
        }

        assert parse(json.dumps(body)).client_fields() == body

    def test_defaults_not_sent_are_not_part_of_the_request(self) -> None:
        # Given a body with no options at all
        request = parse('{"operation": "summarize", "input": {"text": "x"}}')

        # Then neither options nor any server-side default (model, prompt version) is fingerprinted
        assert request.client_fields() == {"operation": "summarize", "input": {"text": "x"}}

    @pytest.mark.parametrize(
        "spelled",
        [
            '{"operation": "summarize", "input": {"text": "x"}, "options": {"stream": false}}',
            '{"operation": "summarize", "input": {"text": "x"}}',
        ],
        ids=["stream false", "no options"],
    )
    def test_a_new_option_at_its_default_is_not_fingerprinted(self, spelled: str) -> None:
        # Given the same request with the new option spelled out at its default, and left out
        plain = parse('{"operation": "summarize", "input": {"text": "x"}}')

        # Then both replay each other
        assert fingerprint(parse(spelled).client_fields()) == fingerprint(plain.client_fields())

    def test_a_new_option_at_its_default_leaves_the_other_options_fingerprinted(self) -> None:
        request = parse(
            '{"operation":"summarize","input":{"text":"x"},"options":{"stream":false,"model":"m"}}'
        )

        assert request.client_fields() == {
            "operation": "summarize",
            "input": {"text": "x"},
            "options": {"model": "m"},
        }

    def test_an_empty_options_object_is_still_what_was_sent(self) -> None:
        # Options that were empty before this rule keep their fingerprint: a retry across the deploy replays.
        assert parse('{"operation":"summarize","input":{"text":"x"},"options":{}}').client_fields() == {
            "operation": "summarize",
            "input": {"text": "x"},
            "options": {},
        }

    def test_streaming_is_part_of_the_fingerprint(self) -> None:
        streamed = parse('{"operation":"summarize","input":{"text":"x"},"options":{"stream":true}}')
        plain = parse('{"operation":"summarize","input":{"text":"x"}}')

        assert fingerprint(streamed.client_fields()) != fingerprint(plain.client_fields())

    def test_key_order_does_not_change_the_fingerprint(self) -> None:
        one = parse('{"operation":"classify","input":{"text":"x"},"options":{"labels":["a"],"model":"m"}}')
        other = parse('{"options":{"model":"m","labels":["a"]},"input":{"text":"x"},"operation":"classify"}')

        assert fingerprint(one.client_fields()) == fingerprint(other.client_fields())

    def test_whitespace_between_tokens_does_not_change_the_fingerprint(self) -> None:
        compact = parse('{"operation":"summarize","input":{"text":"x"}}')
        spaced = parse('{ "operation" : "summarize" ,\n "input" : { "text" : "x" } }')

        assert fingerprint(compact.client_fields()) == fingerprint(spaced.client_fields())

    @pytest.mark.parametrize(
        "other",
        [
            {"operation": "summarize", "input": {"text": "y"}},
            {"operation": "analyze", "input": {"text": "x"}},
            {"operation": "summarize", "input": {"text": "x "}},
            {"operation": "summarize", "input": {"text": "x"}, "options": {"maxOutputTokens": 10}},
        ],
        ids=["other text", "other operation", "trailing space", "an option"],
    )
    def test_a_different_request_has_a_different_fingerprint(self, other: dict[str, Any]) -> None:
        assert fingerprint_of(other) != fingerprint_of({"operation": "summarize", "input": {"text": "x"}})

    def test_label_order_is_part_of_the_request(self) -> None:
        def labels(*names: str) -> dict[str, Any]:
            return {"operation": "classify", "input": {"text": "x"}, "options": {"labels": list(names)}}

        assert fingerprint_of(labels("a", "b")) != fingerprint_of(labels("b", "a"))

    def test_only_what_was_sent_counts_even_when_it_equals_a_default(self) -> None:
        # Sending the default model, or an empty options object, is a different request from
        # leaving it out: the fingerprint covers what the client sent, never server defaults.
        bare = {"operation": "summarize", "input": {"text": "x"}}

        assert fingerprint_of({**bare, "options": {"model": "gpt-4o-mini"}}) != fingerprint_of(bare)
        assert fingerprint_of({**bare, "options": {}}) != fingerprint_of(bare)

    def test_non_ascii_text_is_fingerprinted_by_its_characters(self) -> None:
        accented = fingerprint_of({"operation": "summarize", "input": {"text": "café"}})
        decomposed = fingerprint_of({"operation": "summarize", "input": {"text": "cafe\u0301"}})

        assert accented == fingerprint_of({"operation": "summarize", "input": {"text": "caf\u00e9"}})
        assert accented != decomposed

    def test_is_a_sha256_hex_digest(self) -> None:
        digest = fingerprint_of({"operation": "summarize", "input": {"text": "x"}})

        assert len(digest) == 64
        assert set(digest) <= set(string.hexdigits.lower())
