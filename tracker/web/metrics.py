"""GET /metrics (Prometheus text format), and the webhook's answers counted by reason
(tracker.metrics defines the metrics and collects them).

Open unless TRACKER_METRICS_TOKEN is set; then only `Authorization: Bearer <token>` reads it (401
otherwise, compared in constant time). Open by default because it shows counts, durations, queue
lengths and the names of the public repositories the index page lists, never a secret, a body or a
header. While it is open, the per-repository metrics leave private repositories (config `public:
false`) out altogether: no label names them and no figure is added up under another label, so
nothing tells that they exist. With the token set, every repository the ledger knows has its labels;
set it when the traffic is not for everyone who can reach the service, or to watch private ones.
"""

from __future__ import annotations

import functools
import hmac
from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, request
from werkzeug.exceptions import RequestEntityTooLarge

from tracker import metrics
from tracker.github.quota import Quota
from tracker.web.access import NO_STORE, bearer_token
from tracker.web.context import DELIVERY_ID
from tracker.web.context import services as current_services

blueprint = Blueprint("metrics", __name__)

# POST /webhook's answers (README, "What POST /webhook answers") and the reason each stands for.
_REASON_BY_STATUS = {
    401: "bad_signature",
    413: "oversized",
    415: "unsupported_content_type",
    422: "incomplete",
    204: "unknown_event",
}


@blueprint.get("/metrics")
def scrape() -> Any:
    services = current_services()
    token = services.settings.metrics_token
    if token is not None:
        given = bearer_token(request.headers.get("Authorization")) or ""
        if not hmac.compare_digest(given.encode(), token.get_secret_value().encode()):
            return (
                {"error": "send Authorization: Bearer <TRACKER_METRICS_TOKEN>"},
                401,
                {"WWW-Authenticate": 'Bearer realm="metrics"'},
            )

    def repositories() -> list[str]:
        names = services.state.repository_names()
        # Open to anyone: the public repositories alone (see the module's docstring).
        return names if token is not None else [name for name in names if services.config.is_public(name)]

    sources = metrics.ScrapeSources(
        redis=services.redis,
        queues={q.name: q.key for q in (services.delivery_queue, services.github_queue, services.records_queue)}
        if services.redis is not None
        else {},
        quota=lambda: _quota(services.require_redis()),
        repositories=repositories,
    )
    return Response(metrics.exposition(sources), content_type=metrics.CONTENT_TYPE, headers=NO_STORE)


def _quota(connection: Any) -> metrics.QuotaSeen:
    seen = Quota(connection).summary()
    return metrics.QuotaSeen(remaining=seen["remaining"], limit=seen["limit"])


View = Callable[..., Any]


def counted_deliveries(view: View) -> View:
    """POST /webhook counted: every request received, then accepted (202) or rejected by the reason
    its answer stands for. A request that fails (500) is received and nothing else."""

    @functools.wraps(view)
    def counted(*args: Any, **kwargs: Any) -> Any:
        metrics.DELIVERIES_RECEIVED.inc()
        try:
            answer = view(*args, **kwargs)
        except RequestEntityTooLarge:  # a chunked body past the cap, refused by Werkzeug while read
            metrics.rejected("oversized")
            raise
        body, status = answer[0], answer[1]
        if status == 202:
            metrics.DELIVERIES_ACCEPTED.inc()
        else:
            metrics.rejected(_reason(status, body))
        return answer

    return counted


def _reason(status: int, body: dict[str, Any]) -> str:
    if status == 200:
        return {"duplicate": "duplicate", "pong": "ping"}.get(str(body.get("status")), "other")
    if status == 400:
        event = request.headers.get("X-GitHub-Event", "").strip()
        delivery = DELIVERY_ID.fullmatch(request.headers.get("X-GitHub-Delivery", "").strip())
        return "missing_headers" if not event or not delivery else "malformed"
    return _REASON_BY_STATUS.get(status, "other")
