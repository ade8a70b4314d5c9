"""Presigned POST forms for the upload front's tests, signed by boto3 as the documents function signs them."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

REGION = "us-east-1"
BUCKET = "documents-bucket"
KEY = "documents/acme/alice/0b8f6c1e-2a4d-4e7b-9c3f-5d6e7f8a9b0c/original"
ACCESS_KEY = "ASIALOCALSIGNER00"
SECRET = "local"
SIZE = 1000


def signed_form(expires_in: int = 600, access_key: str = ACCESS_KEY) -> dict[str, str]:
    """What the documents function answers: boto3's presigned POST, key, type and size pinned."""
    client: Any = boto3.client(
        "s3",
        endpoint_url="http://127.0.0.1:9",
        region_name=REGION,
        aws_access_key_id=access_key,
        aws_secret_access_key=SECRET,
        config=Config(signature_version="s3v4"),
    )
    post = client.generate_presigned_post(
        Bucket=BUCKET,
        Key=KEY,
        Fields={"Content-Type": "application/pdf"},
        Conditions=[{"Content-Type": "application/pdf"}, ["content-length-range", 1, SIZE]],
        ExpiresIn=expires_in,
    )
    return {str(k): str(v) for k, v in post["fields"].items()}
