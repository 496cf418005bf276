"""GitHub webhook signatures: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>`.

GitHub signs the body bytes exactly as sent, so verification happens before any parsing, and the
comparison is constant-time (GitHub's "Validating webhook deliveries": never use a plain `==`).
"""

from __future__ import annotations

import hashlib

from itsdangerous.signer import HMACAlgorithm

_HMAC_SHA256 = HMACAlgorithm(hashlib.sha256)
_PREFIX = "sha256="


def sign(secret: bytes, body: bytes) -> str:
    """The header value GitHub would send for `body`."""
    return _PREFIX + _HMAC_SHA256.get_signature(secret, body).hex()


def is_valid(secret: bytes, body: bytes, header: str | None) -> bool:
    """True when `header` is GitHub's signature of `body` under `secret`."""
    if not header or not header.startswith(_PREFIX):
        return False
    try:
        claimed = bytes.fromhex(header[len(_PREFIX) :])
    except ValueError:
        return False
    # verify_signature compares with hmac.compare_digest.
    return bool(_HMAC_SHA256.verify_signature(secret, body, claimed))
