"""The size DynamoDB bills an item at, by its documented rules ("Item sizes and capacity unit
consumption"): the UTF-8 lengths of the attribute names plus the sizes of their values; numbers
take 1 byte per two significant digits plus 1 byte; null and Boolean 1 byte; a list or map 3
bytes plus its elements. Used to keep the job item within one write unit (1 KB) and by the
benchmark's unit accounting.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Mapping
from typing import Any

Item = Mapping[str, Any]
"""An item in DynamoDB's attribute-value form ({"name": {"S": "..."}})."""


def _number_size(text: str) -> int:
    digits = text.strip().lstrip("+-").lower()
    mantissa, _, _exponent = digits.partition("e")
    significant = mantissa.replace(".", "").strip("0")
    return math.ceil(len(significant) / 2) + 1


def _string_size(content: Any) -> int:
    return len(str(content).encode("utf-8"))


def _binary_size(content: Any) -> int:
    # Binary values travel base64-encoded but are billed at their raw length.
    return len(content) if isinstance(content, bytes | bytearray) else len(base64.b64decode(str(content)))


_SIZES: dict[str, Callable[[Any], int]] = {
    "S": _string_size,
    "N": lambda content: _number_size(str(content)),
    "B": _binary_size,
    "BOOL": lambda _content: 1,
    "NULL": lambda _content: 1,
    "SS": lambda content: sum(_string_size(s) for s in content),
    "NS": lambda content: sum(_number_size(str(n)) for n in content),
    "BS": lambda content: sum(_binary_size(b) for b in content),
    "L": lambda content: 3 + sum(value_size(element) for element in content),
    "M": lambda content: 3 + item_size(content),
}


def value_size(value: Mapping[str, Any]) -> int:
    """The size of one attribute value (without its name)."""
    kind, content = next(iter(value.items()))
    if kind not in _SIZES:
        raise ValueError(f"unknown attribute value type {kind!r}")
    return _SIZES[kind](content)


def item_size(item: Item) -> int:
    """The size DynamoDB bills an item at: attribute names plus values."""
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in item.items())
