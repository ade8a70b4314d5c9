"""IAM identity-policy evaluation, pure: policy documents + action + resource -> a decision.

The rules AWS documents for one principal's identity-based policies ("Policy evaluation logic"):
an explicit Deny in any statement wins; otherwise any Allow allows; otherwise the request is
implicitly denied. A statement applies when its Action (or NotAction) matches the action, its
Resource (or NotResource) matches the resource, and its Condition holds.

- Actions match case-insensitively, with `*` and `?` wildcards.
- Resources match case-sensitively; `*` and `?` stay inside an ARN segment (between colons),
  except a `*` that ends a segment, which may run past the colons after it (IAM User Guide,
  "IAM JSON policy elements: Resource").
- Conditions are evaluated against the keys local mode models (`context`: key -> its values; an
  empty list is a key that is modelled but absent from this request). What cannot be evaluated
  here (a key local mode does not model, an operator it does not know, a policy variable) never
  widens access: an Allow statement that depends on it does not apply, a Deny statement does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import Enum
from functools import lru_cache
from typing import Any

Document = Mapping[str, Any]
Context = Mapping[str, Sequence[str]]


class Decision(Enum):
    """The outcome of evaluating a request against a principal's policies."""

    ALLOWED = "allowed"
    IMPLICIT_DENY = "implicit deny"  # no statement allows it
    EXPLICIT_DENY = "explicit deny"  # a Deny statement matched

    @property
    def allowed(self) -> bool:
        """True only for ALLOWED."""
        return self is Decision.ALLOWED


def evaluate(
    documents: Iterable[Document], action: str, resource: str, context: Context | None = None
) -> Decision:
    """The decision for `action` on `resource` under these identity-based policy documents."""
    allowed = False
    for document in documents:
        for statement in _statements(document):
            effect = statement.get("Effect")
            if effect not in {"Allow", "Deny"}:
                raise PolicyError(f"a statement's Effect must be Allow or Deny, not {effect!r}")
            applies = _applies(statement, action, resource, context or {})
            # Unknown (None): an Allow that might not apply does not; a Deny that might apply does.
            if effect == "Deny" and applies is not False:
                return Decision.EXPLICIT_DENY
            if effect == "Allow" and applies is True:
                allowed = True
    return Decision.ALLOWED if allowed else Decision.IMPLICIT_DENY


class PolicyError(ValueError):
    """A policy document that is not valid IAM (local mode refuses it rather than guess)."""


def _statements(document: Document) -> list[Mapping[str, Any]]:
    statements = document.get("Statement", [])
    return [statements] if isinstance(statements, Mapping) else list(statements)


def _as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    raise PolicyError(f"expected a string or a list of strings, not {value!r}")


def _applies(statement: Mapping[str, Any], action: str, resource: str, context: Context) -> bool | None:
    """True, False, or None when it depends on something local mode cannot evaluate."""
    if not _element_matches(statement, "Action", action, action_matches):
        return False
    resource_match = _element_matches(statement, "Resource", resource, resource_matches)
    if resource_match is False:
        return False
    condition = conditions_hold(statement.get("Condition", {}), context)
    if condition is False:
        return False
    return None if resource_match is None or condition is None else True


def _element_matches(
    statement: Mapping[str, Any], name: str, value: str, matches: Callable[[str, str], bool | None]
) -> bool | None:
    """Action/NotAction or Resource/NotResource against `value` (exactly one of each pair)."""
    negated = f"Not{name}"
    if (name in statement) == (negated in statement):
        raise PolicyError(f"a statement needs exactly one of {name} and {negated}")
    patterns = _as_list(statement[name] if name in statement else statement[negated])
    outcomes = [matches(pattern, value) for pattern in patterns]
    found: bool | None = True if True in outcomes else (None if None in outcomes else False)
    if negated in statement and found is not None:
        return not found
    return found


def action_matches(pattern: str, action: str) -> bool:
    """An Action pattern (`service:Name`, `*` and `?` wildcards) against an action, ignoring case."""
    return _glob(pattern.lower()).fullmatch(action.lower()) is not None


def resource_matches(pattern: str, resource: str) -> bool | None:
    """A Resource pattern against an ARN; None for a pattern with a policy variable (`${...}`)."""
    if "${" in pattern:
        return None
    return _resource_regex(pattern).fullmatch(resource) is not None


@lru_cache(maxsize=1024)
def _glob(pattern: str) -> re.Pattern[str]:
    """`*` any run of characters, `?` any one (actions and StringLike values)."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern))


@lru_cache(maxsize=1024)
def _resource_regex(pattern: str) -> re.Pattern[str]:
    if pattern == "*":
        return re.compile(".*")
    parts = []
    for index, character in enumerate(pattern):
        if character == "*":
            ends_segment = index + 1 == len(pattern) or pattern[index + 1] == ":"
            parts.append(".*" if ends_segment else "[^:]*")
        elif character == "?":
            parts.append("[^:]")
        else:
            parts.append(re.escape(character))
    return re.compile("".join(parts))


# --- conditions -------------------------------------------------------------------------------


def conditions_hold(block: Mapping[str, Any], context: Context) -> bool | None:
    """Every operator's every key must hold (AND); None when one cannot be evaluated here."""
    outcome: bool | None = True
    for operator, keys in block.items():
        if not isinstance(keys, Mapping):
            raise PolicyError(f"condition {operator} must map keys to values")
        for key, expected in keys.items():
            found = _condition(operator, key, _values(expected), context)
            if found is False:
                return False
            if found is None:
                outcome = None
    return outcome


def _values(expected: Any) -> list[str]:
    """A condition's values as strings (JSON booleans and numbers as IAM reads them)."""
    items = expected if isinstance(expected, list) else [expected]
    return [str(item).lower() if isinstance(item, bool) else str(item) for item in items]


def _condition(operator: str, key: str, expected: list[str], context: Context) -> bool | None:
    qualifier, _, name = operator.rpartition(":")
    if_exists = name.endswith("IfExists")
    name = name.removesuffix("IfExists")
    test = _OPERATORS.get(name)
    if key not in context or qualifier not in {"", "ForAnyValue", "ForAllValues"}:
        return None  # a key local mode does not model: AWS would know its value, local mode does not
    actual = list(context[key])
    if name == "Null":
        return (not actual) == (expected[0].lower() == "true")
    if test is None:
        return None  # an operator local mode does not model (dates, IP addresses, binary)
    negated = "Not" in name
    if not actual:
        # A missing key: IfExists and negated operators hold, and ForAllValues of nothing is true.
        return if_exists or negated or qualifier == "ForAllValues"
    outcomes = [any(test(value, pattern) for pattern in expected) != negated for value in actual]
    return all(outcomes) if qualifier == "ForAllValues" else any(outcomes)


def _like(value: str, pattern: str) -> bool:
    return _glob(pattern).fullmatch(value) is not None


def _number(compare: Callable[[float, float], bool]) -> Callable[[str, str], bool]:
    def test(value: str, pattern: str) -> bool:
        try:
            return compare(float(value), float(pattern))
        except ValueError:
            return False

    return test


# Each operator as its positive test; the `Not` forms negate the outcome over all values.
_OPERATORS: dict[str, Callable[[str, str], bool]] = {
    "StringEquals": lambda value, pattern: value == pattern,
    "StringNotEquals": lambda value, pattern: value == pattern,
    "StringEqualsIgnoreCase": lambda value, pattern: value.lower() == pattern.lower(),
    "StringNotEqualsIgnoreCase": lambda value, pattern: value.lower() == pattern.lower(),
    "StringLike": _like,
    "StringNotLike": _like,
    "ArnEquals": lambda value, pattern: resource_matches(pattern, value) is True,
    "ArnNotEquals": lambda value, pattern: resource_matches(pattern, value) is True,
    "ArnLike": lambda value, pattern: resource_matches(pattern, value) is True,
    "ArnNotLike": lambda value, pattern: resource_matches(pattern, value) is True,
    "Bool": lambda value, pattern: value.lower() == pattern.lower(),
    "NumericEquals": _number(lambda a, b: a == b),
    "NumericNotEquals": _number(lambda a, b: a == b),
    "NumericLessThan": _number(lambda a, b: a < b),
    "NumericLessThanEquals": _number(lambda a, b: a <= b),
    "NumericGreaterThan": _number(lambda a, b: a > b),
    "NumericGreaterThanEquals": _number(lambda a, b: a >= b),
}


def local_context(role_arn: str, account: str, region: str) -> dict[str, list[str]]:
    """The global condition keys local mode models for a function's request.

    Local mode talks plain http on loopback, which stands for the TLS every AWS SDK call uses:
    `aws:SecureTransport` is true. A role session's `aws:PrincipalArn` is the role's ARN.
    """
    return {
        "aws:SecureTransport": ["true"],
        "aws:PrincipalArn": [role_arn],
        "aws:PrincipalAccount": [account],
        "aws:RequestedRegion": [region],
    }
