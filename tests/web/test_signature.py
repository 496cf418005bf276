"""`tracker/signature.py`: GitHub's `X-Hub-Signature-256` header, checked over the raw body bytes."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from tracker.web.signature import is_valid, sign

# GitHub's published test vector ("Validating webhook deliveries", "Testing the webhook payload validation").
VECTOR_SECRET = b"It's a Secret to Everybody"
VECTOR_BODY = b"Hello, World!"
VECTOR_HEADER = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
VECTOR_HEX = VECTOR_HEADER.removeprefix("sha256=")


def test_github_published_test_vector() -> None:
    assert sign(VECTOR_SECRET, VECTOR_BODY) == VECTOR_HEADER
    assert is_valid(VECTOR_SECRET, VECTOR_BODY, VECTOR_HEADER) is True


def test_wrong_secret_is_refused() -> None:
    assert is_valid(b"It's a secret to everybody", VECTOR_BODY, VECTOR_HEADER) is False
    assert is_valid(b"", VECTOR_BODY, VECTOR_HEADER) is False


def test_changed_body_is_refused() -> None:
    assert is_valid(VECTOR_SECRET, b"Hello, World!\n", VECTOR_HEADER) is False
    assert is_valid(VECTOR_SECRET, b"Hello, World?", VECTOR_HEADER) is False


@pytest.mark.parametrize("header", [None, ""], ids=["absent", "empty"])
def test_missing_header_is_refused(header: str | None) -> None:
    assert is_valid(VECTOR_SECRET, VECTOR_BODY, header) is False


@pytest.mark.parametrize(
    "header",
    [
        VECTOR_HEX,  # the bare hex digest, no prefix
        "sha1=" + VECTOR_HEX,  # the legacy X-Hub-Signature prefix
        "SHA256=" + VECTOR_HEX,  # GitHub's prefix is lower case
        " sha256=" + VECTOR_HEX,
        "sha256:" + VECTOR_HEX,
    ],
    ids=["bare-hex", "sha1-prefix", "upper-case-prefix", "leading-space", "colon"],
)
def test_header_without_sha256_prefix_is_refused(header: str) -> None:
    assert is_valid(VECTOR_SECRET, VECTOR_BODY, header) is False


@pytest.mark.parametrize(
    "header",
    [
        VECTOR_HEADER[:-2],  # one byte short, still even-length hex
        VECTOR_HEADER[:-1],  # odd-length hex
        "sha256=" + VECTOR_HEX[:32],  # half the digest
        "sha256=",  # nothing after the prefix
    ],
    ids=["minus-one-byte", "odd-length", "half", "prefix-only"],
)
def test_truncated_hex_is_refused(header: str) -> None:
    assert is_valid(VECTOR_SECRET, VECTOR_BODY, header) is False


@pytest.mark.parametrize(
    "header",
    [
        "sha256=" + "z" * 64,
        "sha256=" + VECTOR_HEX[:-1] + "g",
        "sha256=" + VECTOR_HEX + "00",  # one byte too many
        "sha256=0x" + VECTOR_HEX[:-2],
    ],
    ids=["all-z", "last-char-g", "one-byte-too-many", "0x-prefix"],
)
def test_non_hex_or_wrong_length_is_refused(header: str) -> None:
    assert is_valid(VECTOR_SECRET, VECTOR_BODY, header) is False


def test_empty_body_is_signed_like_any_other() -> None:
    # HMAC-SHA256 of zero bytes under the vector's secret, computed once with the standard library.
    expected = "sha256=66a0c074deaa0f489ead6537e0d32f9a344b90bbeda705b6ed45ecd3b413fb40"
    assert expected == "sha256=" + hmac.new(VECTOR_SECRET, b"", hashlib.sha256).hexdigest()
    assert sign(VECTOR_SECRET, b"") == expected
    assert is_valid(VECTOR_SECRET, b"", expected) is True
    assert is_valid(VECTOR_SECRET, b"", VECTOR_HEADER) is False
    assert is_valid(VECTOR_SECRET, VECTOR_BODY, expected) is False


def test_sign_matches_the_standard_library_hmac() -> None:
    body = b'{"action":"opened","number":1}'
    secret = b"test-webhook-secret"
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    assert sign(secret, body) == expected
    assert is_valid(secret, body, expected) is True
