"""A small builder for DynamoDB update and condition expressions with safe placeholders."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any

from shared.adapters.dynamo_items import serialize


class UpdateBuilder:
    """Collects SET/REMOVE/ADD clauses and conditions; every name and value gets a placeholder."""

    def __init__(self) -> None:
        self._sets: list[str] = []
        self._removes: list[str] = []
        self._adds: list[str] = []
        self._conditions: list[str] = []
        self._names: dict[str, str] = {}
        self._values: dict[str, Any] = {}

    def name(self, attribute: str) -> str:
        """The placeholder of an attribute name (reserved words such as `status` need one)."""
        placeholder = f"#{attribute}"
        self._names[placeholder] = attribute
        return placeholder

    def value(self, value: Any) -> str:
        """A fresh placeholder for a value."""
        placeholder = f":v{len(self._values)}"
        self._values[placeholder] = value
        return placeholder

    def set(self, attribute: str, value: Any) -> UpdateBuilder:
        """SET attribute = value."""
        self._sets.append(f"{self.name(attribute)} = {self.value(value)}")
        return self

    def set_expression(self, attribute: str, expression: str) -> UpdateBuilder:
        """SET attribute = an expression built from this builder's placeholders."""
        self._sets.append(f"{self.name(attribute)} = {expression}")
        return self

    def remove(self, *attributes: str) -> UpdateBuilder:
        """REMOVE the attributes."""
        self._removes.extend(self.name(attribute) for attribute in attributes)
        return self

    def add(self, attribute: str, amount: int) -> UpdateBuilder:
        """ADD amount to a number attribute (creating it at 0)."""
        self._adds.append(f"{self.name(attribute)} {self.value(amount)}")
        return self

    def add_to_set(self, attribute: str, members: AbstractSet[str]) -> UpdateBuilder:
        """ADD members to a string set attribute (creating it); nothing for no members."""
        if members:
            self._adds.append(f"{self.name(attribute)} {self.value(members)}")
        return self

    def require(self, condition: str) -> UpdateBuilder:
        """AND a condition (built from this builder's placeholders) onto the write."""
        self._conditions.append(condition)
        return self

    def request(self) -> dict[str, Any]:
        """The UpdateExpression/ConditionExpression arguments of an UpdateItem call."""
        clauses = []
        if self._sets:
            clauses.append("SET " + ", ".join(self._sets))
        if self._removes:
            clauses.append("REMOVE " + ", ".join(self._removes))
        if self._adds:
            clauses.append("ADD " + ", ".join(self._adds))
        arguments: dict[str, Any] = {
            "UpdateExpression": " ".join(clauses),
            "ExpressionAttributeNames": self._names,
        }
        if self._values:
            arguments["ExpressionAttributeValues"] = serialize(self._values)
        if self._conditions:
            arguments["ConditionExpression"] = " AND ".join(f"({c})" for c in self._conditions)
        return arguments
