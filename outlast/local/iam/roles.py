"""Each function's role, read from the synthesized template and resolved to local ARNs.

A function's permissions are the documents attached to its role (its `Role` is
`Fn::GetAtt ROLE.Arn`): every AWS::IAM::Policy and AWS::IAM::ManagedPolicy that lists the role,
the role's inline `Policies`, and the template's managed policies it names in
`ManagedPolicyArns`. An AWS-managed policy (`arn:aws:iam::aws:policy/...`) is not in the template:
local mode applies none of its grants and says so at start. A permissions boundary is refused
rather than ignored (ignoring it would widen the role).

What a function process needs to enforce its role is written to one JSON file per function
(`RoleFile`), which the process re-reads when it changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from outlast.local.iam.requests import Where
from outlast.local.template import ACCOUNT_ID, REGION, Resolver, Resource, Template, TemplateError

ENV_ROLE_FILE = "OUTLAST_IAM_ROLE_FILE"
AWS_MANAGED_PREFIX = "arn:aws:iam::aws:policy/"
# Local mode signs nothing that anyone verifies, so the secret is the same for every role; the
# access key id is what tells the roles apart (and what a local S3 front reads off a signature).
SECRET_ACCESS_KEY = "local"  # noqa: S105 - not a secret: nothing verifies it


def access_key_id(role_logical_id: str) -> str:
    """A role's local access key id: stable across restarts, distinct per role, AWS-shaped."""
    return "ASIA" + hashlib.sha256(role_logical_id.encode()).hexdigest()[:16].upper()


@dataclass(frozen=True)
class FunctionRole:
    """Everything the guard needs for one function: who it is, its role's policies, local facts."""

    function: str  # the function's logical id
    function_name: str
    role: str  # the role's logical id
    role_name: str
    documents: tuple[Mapping[str, Any], ...]
    where: Where
    denials: str  # the denial log's path
    unmodeled: tuple[str, ...] = ()  # AWS-managed policy ARNs whose grants local mode cannot apply

    @property
    def role_arn(self) -> str:
        """The role's ARN (what `aws:PrincipalArn` is for its sessions)."""
        return f"arn:aws:iam::{self.where.account}:role/{self.role_name}"

    @property
    def principal(self) -> str:
        """The role session's ARN, as AWS names it in an AccessDenied message."""
        return f"arn:aws:sts::{self.where.account}:assumed-role/{self.role_name}/{self.function_name}"

    @property
    def access_key_id(self) -> str:
        """The function's own access key id (one per role)."""
        return access_key_id(self.role)

    def to_json(self) -> str:
        """The role file's content."""
        where = {
            "region": self.where.region,
            "account": self.where.account,
            "stages": {url: list(stage) for url, stage in self.where.stages.items()},
            "secrets": dict(self.where.secrets),
        }
        body = {
            "function": self.function,
            "functionName": self.function_name,
            "role": self.role,
            "roleName": self.role_name,
            "documents": list(self.documents),
            "where": where,
            "denials": self.denials,
            "unmodeled": list(self.unmodeled),
        }
        return json.dumps(body, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> FunctionRole:
        """A role file read back."""
        body = json.loads(text)
        where = body["where"]
        return cls(
            function=body["function"],
            function_name=body["functionName"],
            role=body["role"],
            role_name=body["roleName"],
            documents=tuple(body["documents"]),
            where=Where(
                region=where["region"],
                account=where["account"],
                stages={url: (stage[0], stage[1]) for url, stage in where["stages"].items()},
                secrets=where["secrets"],
            ),
            denials=body["denials"],
            unmodeled=tuple(body.get("unmodeled", [])),
        )


@dataclass
class RoleFile:
    """A function's role file, re-read whenever it changes on disk."""

    path: Path
    _version: tuple[int, int] | None = field(default=None, init=False)
    _role: FunctionRole | None = field(default=None, init=False)

    def current(self) -> FunctionRole:
        """The role as the file says now."""
        stat = self.path.stat()
        version = (stat.st_ino, stat.st_mtime_ns)
        if self._role is None or version != self._version:
            self._role, self._version = FunctionRole.from_json(self.path.read_text()), version
        return self._role

    def write(self, role: FunctionRole) -> bool:
        """Replace the file at once (a reader never sees half of it); True when it changed."""
        text = role.to_json()
        if self.path.exists() and self.path.read_text() == text:
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".role-")
        with os.fdopen(handle, "w") as out:
            out.write(text)
        Path(temporary).replace(self.path)
        return True


def function_roles(
    template: Template, resolver: Resolver, where: Where, denials: Path
) -> Iterator[FunctionRole]:
    """The role of every project function in the template (CDK's own helpers are not run locally)."""
    for function in template.resources("AWS::Lambda::Function"):
        if not str(function.properties.get("Handler", "")).startswith("functions."):
            continue
        role_id = _role_id(function)
        role = template.resource(role_id)
        if "PermissionsBoundary" in role.properties:
            raise TemplateError(f"{role_id} has a permissions boundary, which local mode cannot enforce")
        documents, unmodeled = _documents(template, resolver, role)
        yield FunctionRole(
            function=function.logical_id,
            function_name=str(resolver.ref(function.logical_id)),
            role=role_id,
            role_name=str(resolver.resolve(role.properties.get("RoleName", role_id))),
            documents=tuple(documents),
            where=where,
            denials=str(denials),
            unmodeled=tuple(unmodeled),
        )


def _role_id(function: Resource) -> str:
    role = function.properties.get("Role")
    if isinstance(role, dict) and "Fn::GetAtt" in role:
        target = role["Fn::GetAtt"]
        return str(target[0] if isinstance(target, list) else str(target).split(".", 1)[0])
    raise TemplateError(f"{function.logical_id}'s Role is not a role of this template")


def _documents(template: Template, resolver: Resolver, role: Resource) -> tuple[list[Any], list[str]]:
    reference = {"Ref": role.logical_id}
    documents = [
        resolver.resolve(policy.properties["PolicyDocument"])
        for policy_type in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
        for policy in template.resources(policy_type)
        if reference in policy.properties.get("Roles", [])
    ]
    documents += [
        resolver.resolve(inline["PolicyDocument"]) for inline in role.properties.get("Policies", [])
    ]
    unmodeled = []
    for arn in role.properties.get("ManagedPolicyArns", []):
        if isinstance(arn, dict) and "Ref" in arn:
            managed = template.resource(str(arn["Ref"]))
            if reference not in managed.properties.get("Roles", []):  # not counted twice
                documents.append(resolver.resolve(managed.properties["PolicyDocument"]))
            continue
        unmodeled.append(str(resolver.resolve(arn)))
    return documents, unmodeled


def local_where(stages: Mapping[str, tuple[str, str]], secrets: Mapping[str, str]) -> Where:
    """The local facts ARNs are built from: region, account, WebSocket stages, secrets by name."""
    names = {arn.split(":secret:", 1)[1].rsplit("-", 1)[0]: arn for arn in secrets.values()}
    return Where(region=REGION, account=ACCOUNT_ID, stages=dict(stages), secrets=names)
