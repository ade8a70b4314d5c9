"""Documents' expiry in the template: the documents prefix outlives every record a pin keeps, and
no other lifecycle rule reaches a document's objects (a job's own input expiry leaves them alone)."""

from __future__ import annotations

import pytest

from infra.config import StageConfig
from infra.names import DOCUMENTS, DOCUMENTS_BUCKET, PAYLOAD_BUCKET, STORAGE
from shared import resources as r

pytestmark = pytest.mark.infra


def _rules(synthesized, *path):
    properties = synthesized.resources[synthesized.logical_id(*path)]["Properties"]
    return properties["LifecycleConfiguration"]["Rules"]


def test_document_objects_outlive_the_longest_pin(synthesized):
    """A document takes jobs for documentRetentionDays after its creation, and a pin keeps it
    until its job's expiry (jobRetentionDays after the submit): 30 + 30 days by default."""
    rules = {rule.get("Prefix"): rule for rule in _rules(synthesized, DOCUMENTS, DOCUMENTS_BUCKET)}
    config = StageConfig.model_validate({})

    assert rules[r.DOCUMENTS_PREFIX]["ExpirationInDays"] == 60
    assert config.document_object_expiration_days == 60
    assert rules[r.DOCUMENTS_PREFIX]["Status"] == "Enabled"
    # Only the prefix's rule expires objects: no tag filter, no other rule under it.
    assert "TagFilters" not in rules[r.DOCUMENTS_PREFIX]
    assert {p for p, rule in rules.items() if "ExpirationInDays" in rule} == {r.DOCUMENTS_PREFIX}


def test_the_expiry_follows_both_retentions():
    config = StageConfig.model_validate({"documentRetentionDays": 7, "jobRetentionDays": 14})

    assert config.document_object_expiration_days == 21


def test_job_input_expiry_is_the_payload_buckets_and_never_under_the_documents_prefix(synthesized):
    """A job on a document copies its text as its own input (jobs table or payload bucket): the
    rules that expire inputs are the payload bucket's, none of them on the documents prefix."""
    prefixes = {rule.get("Prefix") for rule in _rules(synthesized, STORAGE, PAYLOAD_BUCKET)}

    assert r.INPUT_PREFIX in prefixes
    assert not any(p and p.startswith(r.DOCUMENTS_PREFIX) for p in prefixes)
    assert synthesized.logical_id(STORAGE, PAYLOAD_BUCKET) != synthesized.logical_id(
        DOCUMENTS, DOCUMENTS_BUCKET
    )
