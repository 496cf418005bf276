"""Job functions. They take ids, and running one twice changes nothing."""

from __future__ import annotations

import logging

from rq import get_current_job

from tracker.derive import PULL_REQUEST, derive
from workers.runtime import current

log = logging.getLogger(__name__)


def process_delivery(delivery_id: str) -> str:
    """Derive a stored delivery's facts and attribute versions into the per-month state."""
    runtime = current()
    delivery = runtime.ledger.get(delivery_id)
    if delivery is None:
        return "unknown delivery"
    try:
        derivation = None
        if delivery.event == PULL_REQUEST:
            derivation = derive(delivery.id, delivery.content_type, delivery.body, runtime.config.timezone_for)
        applied = runtime.state.apply(delivery.id, derivation)
    except Exception as exc:
        job = get_current_job()
        final = job is None or not job.retries_left
        try:
            runtime.ledger.record_attempt_failed(delivery_id, f"{type(exc).__name__}: {exc}", final=final)
        except Exception:  # the ledger itself may be what failed; RQ still retries the job
            log.exception("could not record the failure of delivery %s", delivery_id)
        raise
    return "processed" if applied else "already processed"
