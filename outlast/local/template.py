"""The synthesized CloudFormation template, read the way CloudFormation would read it.

Local mode builds everything from here, so it follows whatever `cdk synth` produced: a table
index, a batch size or a route added in the CDK app needs no other edit to work locally.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ACCOUNT_ID = "123456789012"
REGION = "us-east-1"


class TemplateError(Exception):
    """The template holds something local mode cannot resolve."""


@dataclass(frozen=True)
class Resource:
    """One resource of the template."""

    logical_id: str
    type: str
    properties: dict[str, Any]
    metadata: dict[str, Any]


@dataclass
class Template:
    """A template and the directory it was synthesized into (for asset paths)."""

    path: Path
    body: dict[str, Any]

    @classmethod
    def load(cls, path: Path) -> Template:
        """Read a template file."""
        return cls(path=path, body=json.loads(path.read_text()))

    @property
    def directory(self) -> Path:
        """The cloud assembly directory (cdk.out)."""
        return self.path.parent

    def resources(self, resource_type: str | None = None) -> Iterator[Resource]:
        """Every resource, or those of one type, in template order."""
        for logical_id, resource in self.body.get("Resources", {}).items():
            if resource_type is None or resource["Type"] == resource_type:
                yield Resource(
                    logical_id=logical_id,
                    type=resource["Type"],
                    properties=resource.get("Properties", {}),
                    metadata=resource.get("Metadata", {}),
                )

    def resource(self, logical_id: str) -> Resource:
        """One resource by logical id."""
        resource = self.body["Resources"][logical_id]
        return Resource(
            logical_id, resource["Type"], resource.get("Properties", {}), resource.get("Metadata", {})
        )

    def asset_path(self, resource: Resource) -> Path:
        """The local directory of a function's code asset (CDK records it in the metadata)."""
        path = resource.metadata.get("aws:asset:path")
        if not path:
            raise TemplateError(f"{resource.logical_id} has no asset path; synthesize with the CDK")
        return (self.directory / str(path)).resolve()

    def condition(self, name: str, resolver: Resolver) -> bool:
        """Evaluate a template condition."""
        return bool(resolver.resolve(self.body.get("Conditions", {})[name]))


@dataclass
class Resolver:
    """Resolves intrinsic functions against the local physical resources.

    `refs` maps a logical id to what `Ref` returns; `attributes` maps (logical id, attribute)
    to what `Fn::GetAtt` returns. Both are filled in as local mode creates resources.
    """

    template: Template
    stack_name: str = "outlast-local"
    refs: dict[str, Any] = field(default_factory=dict)
    attributes: dict[tuple[str, str], Any] = field(default_factory=dict)

    def pseudo(self, name: str) -> Any:
        return {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT_ID,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": self.stack_name,
            "AWS::StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT_ID}:stack/{self.stack_name}/local",
            "AWS::NoValue": None,
        }[name]

    def ref(self, name: str) -> Any:
        if name.startswith("AWS::"):
            return self.pseudo(name)
        if name in self.refs:
            return self.refs[name]
        parameters = self.template.body.get("Parameters", {})
        if name in parameters:
            return self._parameter_default(name, parameters[name])
        raise TemplateError(f"Ref {name} is not resolved yet")

    def _parameter_default(self, name: str, parameter: Mapping[str, Any]) -> Any:
        if "Default" not in parameter:
            raise TemplateError(f"parameter {name} has no default")
        return parameter["Default"]

    def get_att(self, logical_id: str, attribute: str) -> Any:
        try:
            return self.attributes[(logical_id, attribute)]
        except KeyError:
            raise TemplateError(f"Fn::GetAtt {logical_id}.{attribute} is not resolved yet") from None

    def resolve(self, value: Any) -> Any:
        """A value with every intrinsic function replaced by what it evaluates to locally."""
        if isinstance(value, list):
            return [item for item in (self.resolve(v) for v in value) if item is not None]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, argument),) = value.items()
            function = _FUNCTIONS.get(key)
            if function is not None:
                return function(self, argument)
        return {key: resolved for key, item in value.items() if (resolved := self.resolve(item)) is not None}


def _join(resolver: Resolver, argument: Any) -> str:
    delimiter, parts = argument
    return str(delimiter).join(str(part) for part in resolver.resolve(parts))


def _sub(resolver: Resolver, argument: Any) -> str:
    text, variables = (argument, {}) if isinstance(argument, str) else argument
    local = {name: resolver.resolve(value) for name, value in variables.items()}
    out, i = [], 0
    while i < len(text):
        start = text.find("${", i)
        if start < 0:
            out.append(text[i:])
            break
        out.append(text[i:start])
        end = text.index("}", start)
        name = text[start + 2 : end]
        if name.startswith("!"):
            out.append("${" + name[1:] + "}")
        elif name in local:
            out.append(str(local[name]))
        elif "." in name and not name.startswith("AWS::"):
            logical_id, attribute = name.split(".", 1)
            out.append(str(resolver.get_att(logical_id, attribute)))
        else:
            out.append(str(resolver.ref(name)))
        i = end + 1
    return "".join(out)


def _get_att(resolver: Resolver, argument: Any) -> Any:
    if isinstance(argument, str):
        argument = argument.split(".", 1)
    logical_id, attribute = argument
    return resolver.get_att(logical_id, resolver.resolve(attribute))


def _select(resolver: Resolver, argument: Any) -> Any:
    index, items = argument
    return resolver.resolve(items)[int(resolver.resolve(index))]


def _split(resolver: Resolver, argument: Any) -> list[str]:
    delimiter, text = argument
    return str(resolver.resolve(text)).split(delimiter)


def _if(resolver: Resolver, argument: Any) -> Any:
    condition, when_true, when_false = argument
    return resolver.resolve(when_true if resolver.template.condition(condition, resolver) else when_false)


def _equals(resolver: Resolver, argument: Any) -> bool:
    left, right = argument
    return bool(resolver.resolve(left) == resolver.resolve(right))


def _not(resolver: Resolver, argument: Any) -> bool:
    return not resolver.resolve(argument[0])


def _and(resolver: Resolver, argument: Any) -> bool:
    return all(resolver.resolve(item) for item in argument)


def _or(resolver: Resolver, argument: Any) -> bool:
    return any(resolver.resolve(item) for item in argument)


def _condition(resolver: Resolver, argument: Any) -> bool:
    return resolver.template.condition(argument, resolver)


def _find_in_map(resolver: Resolver, argument: Any) -> Any:
    name, top, second = (resolver.resolve(part) for part in argument)
    return resolver.template.body["Mappings"][name][top][second]


_FUNCTIONS: dict[str, Callable[[Resolver, Any], Any]] = {
    "Ref": lambda resolver, name: resolver.ref(name),
    "Fn::GetAtt": _get_att,
    "Fn::Join": _join,
    "Fn::Sub": _sub,
    "Fn::Select": _select,
    "Fn::Split": _split,
    "Fn::If": _if,
    "Fn::Equals": _equals,
    "Fn::Not": _not,
    "Fn::And": _and,
    "Fn::Or": _or,
    "Condition": _condition,
    "Fn::FindInMap": _find_in_map,
}
