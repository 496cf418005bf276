"""POST /webhook: verify, store, ask for a drain, answer. It never calls GitHub, nor waits for Redis
in a web process (the ask is made from a thread of the process's own: tracker.queue.DrainAsker).

GitHub gives a delivery 10 seconds before it counts it as failed ("Best practices for using
webhooks"), so everything slow happens in the workers.
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import Any

from flask import Blueprint, request

from tracker.core.derive import PULL_REQUEST
from tracker.core.payloads import (
    FORM_CONTENT_TYPE,
    IncompleteBody,
    MalformedBody,
    check_shape,
    github_id,
    json_bytes,
    parse_ping,
)
from tracker.store.ledger import Delivery, now_ms
from tracker.web import signature
from tracker.web.context import DELIVERY_ID, MAX_BODY_BYTES, REPOSITORY_ENVIRON, clipped
from tracker.web.context import services as current_services
from tracker.web.metrics import counted_deliveries

blueprint = Blueprint("webhook", __name__)
log = logging.getLogger(__name__)

JSON_CONTENT_TYPE = "application/json"
# Headers worth keeping with the raw body (never the signature: it is useless once verified).
KEPT_HEADERS = (
    "User-Agent",
    "X-GitHub-Hook-ID",
    "X-GitHub-Hook-Installation-Target-Type",
    "X-GitHub-Hook-Installation-Target-ID",
    "X-GitHub-Enterprise-Version",
    "X-GitHub-Enterprise-Host",
)

Answer = tuple[dict[str, Any], int]

# X-GitHub-Hook-Installation-Target-Type: `repository`, `organization`, `integration`, …
_TARGET_TYPE = re.compile(r"[a-z_]{1,40}")


@blueprint.post("/webhook")
@counted_deliveries  # received, then accepted or rejected by reason (tracker.metrics)
def receive() -> Answer:
    services = current_services()
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        return _error(413, "the body is larger than GitHub's 25 MB payload cap")
    # A chunked body has no Content-Length: read one byte past the cap, never the whole thing.
    # (Werkzeug's stream for it is limited to MAX_CONTENT_LENGTH, the cap plus that one byte, and
    # raises 413 on any read after the limit, so the body is read in one call.)
    body = request.stream.read(MAX_BODY_BYTES + 1)
    if len(body) > MAX_BODY_BYTES:
        return _error(413, "the body is larger than GitHub's 25 MB payload cap")
    if not signature.is_valid(services.webhook_secret, body, request.headers.get("X-Hub-Signature-256")):
        return _error(401, "missing or wrong X-Hub-Signature-256: check the webhook secret")

    event = request.headers.get("X-GitHub-Event", "").strip()
    delivery_id = request.headers.get("X-GitHub-Delivery", "").strip()
    if not event or not delivery_id:
        return _error(400, "X-GitHub-Event and X-GitHub-Delivery headers are required")
    if not DELIVERY_ID.fullmatch(delivery_id):
        return _error(400, "X-GitHub-Delivery is not a delivery id GitHub sends (a GUID): check what sent it")
    content_type = (request.mimetype or JSON_CONTENT_TYPE).lower()
    if content_type not in (JSON_CONTENT_TYPE, FORM_CONTENT_TYPE):
        return _error(415, f"content type {clipped(content_type)} is not one GitHub sends: use application/json")

    if event == "ping":
        return _ping(body, content_type)
    if event != PULL_REQUEST:
        return {}, 204

    try:
        document = json_bytes(body, content_type)
        shape = check_shape(document)
    except MalformedBody as exc:
        return _error(400, str(exc))
    except IncompleteBody as exc:
        return _error(422, f"the pull_request body lacks what the tracker needs: {exc}")

    request.environ[REPOSITORY_ENVIRON] = shape.repository.full_name  # the access log's `repository`
    delivery = Delivery(
        id=delivery_id,
        event=event,
        action=shape.action,
        repo=shape.repository.full_name,
        hook_id=_hook_id_header(),
        content_type=content_type,
        headers={name: request.headers[name] for name in KEPT_HEADERS if name in request.headers},
        body=body,
        received_at=now_ms(),
    )
    # The signature covers the body only: the same body under a new delivery id is a replay.
    if not services.ledger.receive(delivery, digest=hashlib.sha256(document).hexdigest()):
        return {"status": "duplicate", "delivery": delivery_id}, 200
    try:
        services.drain_asker.ask()  # in a web process, from its own thread (tracker.queue.DrainAsker)
    except Exception as exc:  # stored is accepted: the sweep asks for a drain once Redis is back
        log.warning(
            "could not queue delivery %s (%s: %s); the sweep will",
            delivery_id,
            type(exc).__name__,
            exc,
            extra={"repository": delivery.repo},
        )
    return {"status": "accepted", "delivery": delivery_id}, 202


def _ping(body: bytes, content_type: str) -> Answer:
    try:
        ping = parse_ping(json_bytes(body, content_type))
    except MalformedBody as exc:
        return _error(400, str(exc))
    except IncompleteBody as exc:  # 400, not 422: a ping without its hook is no ping GitHub sends
        return _error(400, f"the ping body lacks its hook: {exc}")
    # The hook's id comes from the signed body: a captured ping replayed under other headers can only
    # count again for the hook it was sent by (one row, not one per header the replayer makes up).
    hook_id = str(ping.hook_id)
    target = request.headers.get("X-GitHub-Hook-Installation-Target-Type")
    current_services().ledger.record_ping(
        hook_id,
        ping.hook.type,
        ping.hook.events,
        target if target is not None and _TARGET_TYPE.fullmatch(target) else None,
    )
    return {"status": "pong", "hook_id": hook_id, "zen": ping.zen}, 200


def _hook_id_header() -> str | None:
    """X-GitHub-Hook-ID when it is one GitHub could send (a positive 64-bit integer), else None: the
    header is not signed, and the ledger keeps up to 32 characters of it."""
    value = request.headers.get("X-GitHub-Hook-ID", "").strip()
    return value if github_id(value) is not None else None


def _error(code: int, message: str) -> Answer:
    return {"error": message}, code
