"""Loading the sample month through the same path as GitHub's webhook deliveries.

Each head's files go straight into the head store first (so no worker ever asks GitHub for them).
Then each delivery is either stored in the ledger under its original delivery id and processed here
by the worker's own job function (`workers.jobs.process_delivery`), or, given a URL, posted signed to
a running service's /webhook, whose workers process it. Loading twice changes nothing: the ledger
keeps each delivery id once, the head store each head once, and a processed delivery stays processed.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from tracker.core.payloads import check_shape, json_bytes
from tracker.core.repository import repository_key
from tracker.demo import SAMPLE_USER_AGENT, Bundle, SampleDelivery, changed_files
from tracker.services import Services
from tracker.store.heads import PULLS
from tracker.store.ledger import PENDING, PROCESSED, Delivery

JSON_CONTENT_TYPE = "application/json"


class DemoRefused(Exception):
    """The sample cannot be loaded here (the message says why and what to do)."""


@dataclass(frozen=True)
class Loaded:
    heads: int  # heads in the sample
    new_heads: int  # of them, stored by this run
    deliveries: int  # deliveries in the sample
    new_deliveries: int  # of them, stored (or accepted by the service) in this run
    processed_now: int  # deliveries this run saw processed that were not before it
    pending: int  # deliveries not processed when the run ended (a service still working on them)

    @property
    def changed(self) -> bool:
        return bool(self.new_heads or self.new_deliveries or self.processed_now)


def check_unmixed(services: Services, bundle: Bundle) -> None:
    """Refuse to add the sample's made-up lives to a ledger holding the repository's real history."""
    repo = repository_key(bundle.repository)
    foreign = services.ledger.others_of(repo, [d.delivery_id for d in bundle.deliveries])
    observed = services.history.observation_count(repo)
    if foreign == 1:
        what = "a delivery of {} that is not the sample's"
    elif foreign:
        what = f"{foreign} deliveries of {{}} that are not the sample's"
    elif observed:
        what = "history of {} read from GitHub (a backfill or reconciliation)"
    else:
        return
    raise DemoRefused(
        f"this ledger already holds {what.format(bundle.repository)}: the sample's made-up lives would mix with "
        "real data. Run the demo on a data directory of its own, e.g. TRACKER_DATA_DIR=./var-demo tracker demo "
        "(and start the service with the same TRACKER_DATA_DIR)"
    )


def store_heads(services: Services, bundle: Bundle) -> tuple[int, int]:
    """(heads in the sample, heads stored now), each under the head sha its deliveries name."""
    rules = services.config.rules_for(bundle.repository)
    repo = repository_key(bundle.repository)
    total = stored = 0
    for story in bundle.stories:
        for sha, listing in story.heads.items():
            total += 1
            stored += services.heads.store(
                repo, story.number, sha, changed_files(listing), truncated=False, source=PULLS, rules=rules
            )
    return total, stored


def statuses(services: Services, bundle: Bundle) -> dict[str, str]:
    """The ledger's status of each sample delivery it holds; one still in its inbox (accepted by a web
    process, not yet moved into the ledger: tracker.store.inbox) is pending."""
    return services.ledger.statuses([d.delivery_id for d in bundle.deliveries])


def _ledger_delivery(bundle: Bundle, sample: SampleDelivery, action: str | None) -> Delivery:
    return Delivery(
        id=sample.delivery_id,
        event=sample.event,
        action=action,
        repo=bundle.repository,
        hook_id=None,  # not from a registered hook: the sample
        content_type=JSON_CONTENT_TYPE,
        headers={"User-Agent": SAMPLE_USER_AGENT},
        body=sample.body,
        received_at=sample.received_at,
    )


def load(services: Services, bundle: Bundle) -> Loaded:
    """Store and process every delivery in this process, as the webhook and a worker would."""
    from workers import runtime
    from workers.jobs import process_delivery

    check_unmixed(services, bundle)
    services.history.mark_sample(bundle.repository)  # so reconciliation never reads its real history in
    heads, new_heads = store_heads(services, bundle)
    before = statuses(services, bundle)
    new = 0
    for sample in bundle.deliveries:
        document = json_bytes(sample.body, JSON_CONTENT_TYPE)
        action = check_shape(document).action  # the webhook's own check of the body
        delivery = _ledger_delivery(bundle, sample, action)
        new += services.ledger.store(delivery, digest=hashlib.sha256(document).hexdigest())
    runtime.install(services)  # the job function finds its services object as in a worker
    try:
        for sample in bundle.deliveries:
            process_delivery(sample.delivery_id)
    finally:
        runtime.install(None)
    after = statuses(services, bundle)
    return Loaded(
        heads=heads,
        new_heads=new_heads,
        deliveries=len(bundle.deliveries),
        new_deliveries=new,
        processed_now=sum(1 for i, s in after.items() if s == PROCESSED and before.get(i) != PROCESSED),
        pending=sum(1 for s in after.values() if s == PENDING),
    )


def post(
    services: Services,
    bundle: Bundle,
    url: str,
    secret: bytes,
    wait: float,
    progress: Callable[[str], None],
) -> Loaded:
    """Post every delivery signed to a running service's webhook, and wait up to `wait` seconds for
    its workers to process them (read from this ledger, which the service must share for the head
    files stored here to spare it the GitHub requests)."""
    import httpx

    from tracker.web.signature import sign

    check_unmixed(services, bundle)
    services.history.mark_sample(bundle.repository)  # so reconciliation never reads its real history in
    heads, new_heads = store_heads(services, bundle)
    before = statuses(services, bundle)
    answers: dict[int, int] = {}
    with httpx.Client(timeout=30) as client:
        for sample in bundle.deliveries:
            try:
                response = client.post(
                    url,
                    content=sample.body,
                    headers={
                        "Content-Type": JSON_CONTENT_TYPE,
                        "User-Agent": SAMPLE_USER_AGENT,
                        "X-GitHub-Event": sample.event,
                        "X-GitHub-Delivery": sample.delivery_id,
                        "X-Hub-Signature-256": sign(secret, sample.body),
                    },
                )
            except httpx.TransportError as exc:
                raise DemoRefused(
                    f"{url} does not answer ({type(exc).__name__}: {exc}): is `tracker run` started?"
                ) from exc
            if response.status_code >= 400:
                raise DemoRefused(f"{url} answered {response.status_code} {response.text.strip()}")
            answers[response.status_code] = answers.get(response.status_code, 0) + 1
    progress(", ".join(f"{count} × {code}" for code, count in sorted(answers.items())) + f" from {url}")
    deadline = time.monotonic() + wait
    while True:
        after = statuses(services, bundle)
        waiting = len(bundle.deliveries) - sum(1 for s in after.values() if s == PROCESSED)
        if not after:
            progress(
                "the service does not write to this ledger: its workers will ask GitHub for the head files; "
                "run the demo with the service's TRACKER_DATA_DIR (or TRACKER_DATABASE_URL)"
            )
            break
        if waiting == 0 or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    return Loaded(
        heads=heads,
        new_heads=new_heads,
        deliveries=len(bundle.deliveries),
        new_deliveries=answers.get(202, 0),
        processed_now=sum(1 for i, s in after.items() if s == PROCESSED and before.get(i) != PROCESSED),
        pending=len(bundle.deliveries) - sum(1 for s in after.values() if s == PROCESSED),
    )
