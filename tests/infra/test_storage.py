"""State: tables built from shared.resources (as the integration tests build them), and the bucket."""

from __future__ import annotations

import pytest

from infra.names import IDEMPOTENCY_TABLE, JOBS_TABLE, PAYLOAD_BUCKET, STORAGE
from shared import resources as r
from tests.support.aws import jobs_table_definition

pytestmark = pytest.mark.infra


def _properties(synthesized, *path):
    return synthesized.resources[synthesized.logical_id(*path)]["Properties"]


@pytest.mark.parametrize("table", [JOBS_TABLE, IDEMPOTENCY_TABLE])
def test_tables_are_encrypted_recoverable_and_expire_by_ttl(synthesized, table):
    properties = _properties(synthesized, STORAGE, table)

    assert properties["BillingMode"] == "PAY_PER_REQUEST"
    assert properties["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert properties["SSESpecification"]["SSEEnabled"] is True
    assert properties["TimeToLiveSpecification"] == {"AttributeName": r.TTL_ATTRIBUTE, "Enabled": True}


def test_jobs_table_matches_the_integration_tests_definition(synthesized):
    # Given the definition the moto-backed tests create the jobs table from
    expected = jobs_table_definition("any")

    # When the CDK app defines the same table
    properties = _properties(synthesized, STORAGE, JOBS_TABLE)

    # Then keys, indexes (key schema and projection) and the stream are the same
    assert properties["KeySchema"] == expected["KeySchema"]
    assert sorted(properties["AttributeDefinitions"], key=str) == sorted(
        expected["AttributeDefinitions"], key=str
    )
    assert properties["GlobalSecondaryIndexes"] == expected["GlobalSecondaryIndexes"]
    assert properties["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}


def test_list_index_projects_only_what_never_changes(synthesized):
    """Any projected attribute a later write changes costs an index write on every such write; the
    list reads the jobs it finds, so the index holds only the keys and the job's expiry."""
    indexes = {
        i["IndexName"]: i for i in _properties(synthesized, STORAGE, JOBS_TABLE)["GlobalSecondaryIndexes"]
    }

    assert indexes[r.LIST_INDEX]["Projection"] == {
        "ProjectionType": "INCLUDE",
        "NonKeyAttributes": ["expiresAt"],
    }
    assert indexes[r.SWEEP_INDEX]["Projection"] == {"ProjectionType": "KEYS_ONLY"}


def test_idempotency_table_has_a_partition_key_only_and_no_stream(synthesized):
    properties = _properties(synthesized, STORAGE, IDEMPOTENCY_TABLE)

    assert properties["KeySchema"] == [{"AttributeName": r.IDEMPOTENCY_PARTITION_KEY, "KeyType": "HASH"}]
    assert "StreamSpecification" not in properties
    assert "GlobalSecondaryIndexes" not in properties


def test_bucket_blocks_public_access_and_is_encrypted(synthesized):
    properties = _properties(synthesized, STORAGE, PAYLOAD_BUCKET)

    assert properties["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    (rule,) = properties["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in {"AES256", "aws:kms"}


def test_bucket_lifecycle_matches_the_retention(synthesized):
    rules = {
        rule.get("Prefix"): rule
        for rule in _properties(synthesized, STORAGE, PAYLOAD_BUCKET)["LifecycleConfiguration"]["Rules"]
    }

    assert rules[r.INPUT_PREFIX]["ExpirationInDays"] == 2  # 24 h after the job ends, in whole days
    assert rules[r.RESULT_PREFIX]["ExpirationInDays"] == 30  # the job retention
    assert rules[None]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}


def test_bucket_policy_denies_requests_without_tls(synthesized):
    bucket = synthesized.logical_id(STORAGE, PAYLOAD_BUCKET)
    (policy,) = [
        p
        for p in synthesized.of_type("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket}
    ]

    assert _denies_insecure_transport(policy["Properties"]["PolicyDocument"])


def _denies_insecure_transport(document):
    return any(
        s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
        for s in document["Statement"]
    )
