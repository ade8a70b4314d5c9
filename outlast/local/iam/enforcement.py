"""Local mode's IAM, as the stack runs it: role files, the pollers' clients, the denial report.

- Each function's role (outlast.local.iam.roles) is written to `<state>/iam-PORT/<function>.json`;
  the function process starts through outlast.local.iam.bootstrap with that file and its own
  access key id, so every call it makes is checked against its own role.
- The event source mappings' polls run under the consuming function's role, as in AWS: the
  stack's pollers use `client(function, service)`, guarded by the same file.
- When the template file changes (a new `cdk synth` into the stack's cloud assembly), the roles
  are read from it again and rewritten; the function processes pick the new files up on their
  next call. Only the roles: any other change to the template needs a restart.
- Every denial lands in `denials.jsonl` beside the role files; `poll()` logs the new ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import boto3

from outlast.local.iam.denials import Denial, DenialLog
from outlast.local.iam.guard import Guard
from outlast.local.iam.policy import evaluate, local_context
from outlast.local.iam.requests import Where
from outlast.local.iam.roles import ENV_ROLE_FILE, SECRET_ACCESS_KEY, FunctionRole, RoleFile, function_roles
from outlast.local.template import REGION, Resolver, Template, TemplateError

Log = Callable[[str], None]


def _version(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_ino, stat.st_mtime_ns


class Enforcement:
    """Every function's role, enforced in its own process and on the pollers that act for it."""

    def __init__(
        self, template: Template, resolver: Resolver, directory: Path, where: Where, log: Log
    ) -> None:
        self.directory = directory
        self.denials = DenialLog(directory / "denials.jsonl")
        self._where = where
        self._log = log
        self._resolver = resolver
        self._template_path = template.path
        self._version = _version(template.path)
        directory.mkdir(parents=True, exist_ok=True)
        self.denials.clear()
        self.roles: dict[str, FunctionRole] = {}
        for role in function_roles(template, resolver, where, self.denials.path):
            self.roles[role.function] = role
            RoleFile(self.role_file(role.function)).write(role)
            for arn in role.unmodeled:
                log(f"[iam] {role.function}: {arn} is AWS-managed; local mode applies none of its grants")

    def role_file(self, function: str) -> Path:
        """Where the function's role file is (by the function's logical id)."""
        return self.directory / f"{function}.json"

    def environment(self, function: str) -> dict[str, str]:
        """What a function process needs: its role file and its own credentials."""
        return {
            ENV_ROLE_FILE: str(self.role_file(function)),
            "AWS_ACCESS_KEY_ID": self.roles[function].access_key_id,
            "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
        }

    def client(self, function: str, service: str, endpoint: str) -> Any:
        """A boto3 client that acts as `function`: its credentials, checked against its role."""
        client = boto3.client(  # type: ignore[call-overload]
            service,
            endpoint_url=endpoint,
            region_name=REGION,
            aws_access_key_id=self.roles[function].access_key_id,
            aws_secret_access_key=SECRET_ACCESS_KEY,
        )
        Guard.of_file(self.role_file(function)).install(client.meta.events)
        return client

    def authorize(self, access_key_id: str, action: str, resource: str, call: str) -> bool:
        """Whether the role behind a local access key id allows the action on the resource; a
        request signed by it and refused (an S3 presigned POST, checked by the upload front) is
        recorded as that function's denial, like every call its guard refuses."""
        role = next((r for r in self.roles.values() if r.access_key_id == access_key_id), None)
        if role is None:
            return False
        context = local_context(role.role_arn, role.where.account, role.where.region)
        decision = evaluate(role.documents, action, resource, context)
        if not decision.allowed:
            denial = Denial(
                function=role.function, action=action, resource=resource, call=call, reason=decision.value
            )
            self.denials.record(denial)
        return decision.allowed

    def poll(self) -> None:
        """Log the denials recorded since the last poll, and re-read the roles if the template changed."""
        for denial in self.denials.new():
            self._log(denial.line())
        self._reread_roles()

    def _reread_roles(self) -> None:
        version = _version(self._template_path)
        if version is None or version == self._version:
            return
        try:
            template = Template.load(self._template_path)
            resolver = Resolver(
                template,
                stack_name=self._resolver.stack_name,
                refs=dict(self._resolver.refs),
                attributes=dict(self._resolver.attributes),
            )
            roles = list(function_roles(template, resolver, self._where, self.denials.path))
        except (ValueError, KeyError, TemplateError) as error:  # half written, or not this app's
            self._log(f"[iam] the template changed, but its roles could not be read yet: {error}")
            return
        self._version = version
        for role in roles:
            if role.function in self.roles and RoleFile(self.role_file(role.function)).write(role):
                self.roles[role.function] = role
                self._log(f"[iam] {role.function}: role re-read from the changed template")

    def describe(self) -> dict[str, Any]:
        """For the stack's state file: where the denials are, and which access key is which role."""
        keys: dict[str, dict[str, Any]] = {}
        for role in self.roles.values():
            entry = keys.setdefault(role.access_key_id, {"role": role.role, "functions": []})
            entry["functions"].append(role.function)
        return {"denials": str(self.denials.path), "roles": str(self.directory), "accessKeys": keys}


def denial_count(state: Mapping[str, Any]) -> int:
    """How many calls the stack described by `state` has denied so far."""
    return len(DenialLog(Path(str(state["iam"]["denials"]))).read())


def denial_summary(state: Mapping[str, Any]) -> list[str]:
    """One line per denial of that stack (for reports)."""
    return [denial.line() for denial in DenialLog(Path(str(state["iam"]["denials"]))).read()]
