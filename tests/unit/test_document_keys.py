"""Object keys of documents: built from the owner and id, parsed back strictly."""

from __future__ import annotations

from urllib.parse import quote_plus, unquote_plus

import pytest

from shared.documents.keys import DocumentKey, DocumentPart, object_key, parse_key
from shared.ids import new_document_id
from shared.job import Caller

PERSONAL = Caller(tenant="user:3b7c1d2e-8f4a", sub="3b7c1d2e-8f4a")
DOCUMENT_ID = "6f1c2b9e-4d3a-4e8f-9a7b-1c2d3e4f5a6b"


def test_the_key_names_the_owner_and_the_document():
    assert object_key(PERSONAL, DOCUMENT_ID, DocumentPart.ORIGINAL) == (
        f"documents/user:3b7c1d2e-8f4a/3b7c1d2e-8f4a/{DOCUMENT_ID}/original"
    )


@pytest.mark.parametrize("part", list(DocumentPart))
@pytest.mark.parametrize(
    "owner", [PERSONAL, Caller(tenant="acme", sub="a.b@c+d=e"), Caller(tenant="t", sub="s")]
)
def test_a_key_parses_back_to_its_document_after_the_events_encoding(owner, part):
    # Given a key as an S3 event carries it: quote_plus, `/` included
    document_id = new_document_id()
    encoded = quote_plus(object_key(owner, document_id, part), safe="")
    assert "/" not in encoded

    # Then decoded, it names the document it was made from
    assert parse_key(unquote_plus(encoded)) == DocumentKey(owner=owner, document_id=document_id, part=part)


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(f"inputs/acme/alice/{DOCUMENT_ID}/original", id="another-prefix"),
        pytest.param(f"documents%2Facme%2Falice%2F{DOCUMENT_ID}%2Foriginal", id="still-encoded"),
        pytest.param(f"documents/acme/alice/{DOCUMENT_ID}", id="no-part"),
        pytest.param(f"documents/acme/alice/{DOCUMENT_ID}/original/more", id="too-deep"),
        pytest.param(f"documents/acme/alice/{DOCUMENT_ID}/thumbnail", id="unknown-part"),
        pytest.param(f"documents/acme/alice/{DOCUMENT_ID.upper()}/original", id="uppercase-id"),
        pytest.param("documents/acme/alice/not-a-uuid/original", id="not-an-id"),
        pytest.param(f"documents/acme#x/alice/{DOCUMENT_ID}/original", id="hash-in-tenant"),
        pytest.param(f"documents//alice/{DOCUMENT_ID}/original", id="empty-tenant"),
        pytest.param(f"documents/acme/{'s' * 129}/{DOCUMENT_ID}/original", id="sub-too-long"),
    ],
)
def test_anything_else_is_no_documents_key(key):
    assert parse_key(key) is None
