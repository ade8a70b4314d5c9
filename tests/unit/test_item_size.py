"""The billed item size, by the rules of DynamoDB's "Item sizes and capacity unit consumption"."""

from __future__ import annotations

import pytest

from shared.adapters.item_size import item_size, value_size


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ({"S": "xyz"}, 3),
        ({"S": "é"}, 2),  # UTF-8 bytes, not characters
        ({"N": "12345"}, 4),  # 1 byte per two significant digits, plus 1
        ({"N": "0.0012"}, 2),  # leading and trailing zeros are not significant
        ({"N": "-1000"}, 2),
        ({"BOOL": True}, 1),
        ({"NULL": True}, 1),
        ({"B": "AAEC"}, 3),  # billed at its raw length, not its base64 text
        ({"SS": ["ab", "c"]}, 3),
        ({"L": [{"S": "ab"}, {"N": "1"}]}, 3 + 2 + 2),
        ({"M": {"k": {"S": "v"}}}, 3 + 1 + 1),
    ],
)
def test_each_kind_of_value_is_billed_by_the_documented_rule(value: dict[str, object], size: int) -> None:
    assert value_size(value) == size


def test_an_item_is_its_names_plus_its_values() -> None:
    item = {"pk": {"S": "JOB#1"}, "attempts": {"N": "12"}, "solo": {"BOOL": True}}

    assert item_size(item) == (2 + 5) + (8 + 2) + (4 + 1)


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown attribute value type"):
        value_size({"X": "?"})
