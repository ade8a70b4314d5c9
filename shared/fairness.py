"""Fairness between tenants: the pure rules both the queues and the running cap follow.

DESIGN.md, "Fairness between tenants". SQS fair queues (a `MessageGroupId` on a standard
queue) serve quiet tenants' messages first; the group is the tenant. No boto3 here: the relay
imports this module, and its cold start has no room for more than hashlib.
"""

from __future__ import annotations

import hashlib
import string

# SQS's limit on MessageGroupId: at most 128 characters, alphanumerics and ASCII punctuation.
MAX_MESSAGE_GROUP_LENGTH = 128
_GROUP_CHARACTERS = frozenset(string.ascii_letters + string.digits + string.punctuation)
_HASHED_PREFIX = "sha256:"


def message_group(tenant: str) -> str:
    """The `MessageGroupId` of every job message of `tenant`: the tenant itself, or its hash.

    A tenant SQS would refuse as a group (longer than 128 characters, or a character outside
    the allowed set) is hashed: still one group per tenant, and a hash cannot collide with a
    tenant sent as itself unless that tenant spells the prefix and 64 hex digits on purpose.
    """
    if 0 < len(tenant) <= MAX_MESSAGE_GROUP_LENGTH and all(c in _GROUP_CHARACTERS for c in tenant):
        return tenant
    return _HASHED_PREFIX + hashlib.sha256(tenant.encode("utf-8")).hexdigest()
