"""A month warmed by the workers (tracker.reports.warm): its month-to-date documents and groupings
computed before anyone asks, equal to what a request computes from nothing, refreshed by the next change,
and at most one warm job waiting per month. Real app, real Redis, real ledger; deliveries through the
webhook and the worker's jobs."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient
from redis import Redis
from rq.registry import ScheduledJobRegistry

from bench.fixtures.paths import require_shared

require_shared()  # bench.fixtures.fake_github reads GitHub's example answers from ../shared as it loads

from bench.fixtures.factory import PullRequestStory  # noqa: E402
from tests.support.app import (  # noqa: E402
    post,
    release_due_jobs,
    run_jobs,
    running_app,  # noqa: E402
)
from tracker.core import clusters  # noqa: E402
from tracker.core.window import Month, month_window, today_in  # noqa: E402
from tracker.queue import WARM_FUNCTION  # noqa: E402
from tracker.reports import groupings, warm  # noqa: E402
from tracker.reports.cache import render_key, rendered_bytes  # noqa: E402
from tracker.reports.loading import resolve  # noqa: E402
from tracker.reports.render import MEMBER_DOCUMENT, Document  # noqa: E402
from tracker.reports.warm import DOCUMENTS, warm_month  # noqa: E402
from tracker.services import Services  # noqa: E402
from tracker.settings import Settings  # noqa: E402
from tracker.web.context import services  # noqa: E402
from workers.jobs import warm_month as warm_job  # noqa: E402

REPO = "octo-org/octo-repo"
TIMEZONE = "Asia/Shanghai"


@pytest.fixture
def built(app: Flask) -> Iterator[Services]:
    with app.app_context():
        yield services()


def this_month() -> Month:
    return Month.parse(today_in(TIMEZONE).strftime("%Y-%m"))


def deliver(client: FlaskClient, app: Flask, number: int, title: str) -> None:
    """A PR opened a few minutes ago (or just after the month began), through the webhook, processed by the
    worker's jobs."""
    month = this_month()
    start = datetime.fromtimestamp(month_window(month, month.first_day, TIMEZONE).start, UTC)
    opened = max(start + timedelta(minutes=1), datetime.now(UTC) - timedelta(minutes=5))
    story = PullRequestStory(number, opened, repo=REPO, title=title).opened()
    for d in story.deliveries:
        assert post(client, d.body, d.event, d.delivery_id).status_code == 202
    run_jobs(app)


def cold(built: Services, fmt: str, lang: str, detail: str) -> bytes:
    """What a request computes with nothing cached anywhere."""
    clusters.forget()
    request = resolve(built, REPO, "current", None)
    return rendered_bytes(built, request, Document(fmt, lang, detail), cache=None)


def served(built: Services, fmt: str, lang: str, detail: str) -> bytes:
    request = resolve(built, REPO, "current", None)
    return rendered_bytes(built, request, Document(fmt, lang, detail), cache=built.redis)


def warm_keys(redis: Redis, built: Services) -> dict[tuple[str, str, str], str]:
    request = resolve(built, REPO, str(this_month()), None)
    return {document: render_key(built, request, document) for document in DOCUMENTS}


def test_a_warmed_month_serves_what_a_request_computes_from_nothing(
    app: Flask, client: FlaskClient, built: Services
) -> None:
    deliver(client, app, 1, "Add a paged KV cache for inference")
    deliver(client, app, 2, "Paged KV cache: evict by recency")
    redis = built.require_redis()
    redis.flushdb()
    warmed = warm_month(built, REPO, str(this_month()))
    assert warmed is not None and (warmed.rendered, warmed.cached) == (len(DOCUMENTS), 0)
    assert warmed.cutoff == today_in(TIMEZONE).isoformat()
    assert all(redis.exists(key) for key in warm_keys(redis, built).values())
    assert list(redis.scan_iter(match=f"{groupings.PREFIX}*"))  # the grouping too
    for fmt, lang, detail in DOCUMENTS:
        assert served(built, fmt, lang, detail) == cold(built, fmt, lang, detail)
    # Warming again with nothing changed renders nothing.
    again = warm_month(built, REPO, str(this_month()))
    assert again is not None and (again.rendered, again.cached) == (0, len(DOCUMENTS))


@pytest.mark.parametrize("entry", [REPO.upper(), "octo-org/*"])
def test_a_repository_in_a_group_is_warmed_with_what_its_groups_read(
    settings: Settings, tmp_path: Path, entry: str
) -> None:
    """A group's report reads each member's `MEMBER_DOCUMENT` (tracker.reports.groups): the warm job keeps it for a
    repository a group names (itself or its owner's `owner/*`), equal to what a request computes from nothing;
    for any other repository, it keeps the reader's documents only."""
    config = tmp_path / "tracker.yaml"
    config.write_text(f"groups:\n  platform: ['{entry}']\n", encoding="utf-8")
    with running_app(settings.model_copy(update={"config_path": config})) as app, app.app_context():
        client, built = app.test_client(), services()
        deliver(client, app, 1, "Add a paged KV cache for inference")
        deliver(client, app, 2, "Paged KV cache: evict by recency")
        redis = built.require_redis()
        redis.flushdb()
        warmed = warm_month(built, REPO, str(this_month()))
        assert warmed is not None and warmed.rendered == len(DOCUMENTS) + 1
        request = resolve(built, REPO, str(this_month()), None)
        assert redis.exists(render_key(built, request, MEMBER_DOCUMENT))
        assert served(built, *MEMBER_DOCUMENT) == cold(built, *MEMBER_DOCUMENT)
    with running_app(settings) as app, app.app_context():  # no group
        built = services()
        redis = built.require_redis()
        redis.flushdb()
        warmed = warm_month(built, REPO, str(this_month()))
        assert warmed is not None and warmed.rendered == len(DOCUMENTS)
        assert not redis.exists(render_key(built, resolve(built, REPO, str(this_month()), None), MEMBER_DOCUMENT))


def test_the_next_change_is_warmed_anew(app: Flask, client: FlaskClient, built: Services) -> None:
    deliver(client, app, 1, "Add a paged KV cache for inference")
    month = str(this_month())
    warm_month(built, REPO, month)
    before = served(built, "json", "en", "full")
    old_keys = warm_keys(built.require_redis(), built)
    deliver(client, app, 3, "Speed up the data loader")
    new_keys = warm_keys(built.require_redis(), built)
    assert set(old_keys.values()).isdisjoint(new_keys.values())  # the month's version moved
    warmed = warm_month(built, REPO, month)
    assert warmed is not None and warmed.rendered == len(DOCUMENTS)
    after = served(built, "json", "en", "full")
    assert after != before and b"Speed up the data loader" in after
    for fmt, lang, detail in DOCUMENTS:
        assert served(built, fmt, lang, detail) == cold(built, fmt, lang, detail)


def test_nothing_is_warmed_without_redis_or_for_an_unknown_repository(
    app: Flask, client: FlaskClient, built: Services
) -> None:
    deliver(client, app, 1, "Add a paged KV cache for inference")
    assert warm_month(built, "someone/else", str(this_month())) is None
    assert warm_month(built, REPO, "2099-01") is None
    without = Services(built.settings, built.config, built.ledger, built.state, redis=None)
    assert warm_month(without, REPO, str(this_month())) is None


def test_at_most_one_warm_job_waits_per_month(app: Flask, client: FlaskClient, built: Services) -> None:
    deliver(client, app, 1, "Add a paged KV cache for inference")
    month = str(this_month())
    queue = built.records_queue
    redis = built.require_redis()
    redis.flushdb()
    assert warm.ask_for_warm(built, REPO, month) is True
    assert warm.ask_for_warm(built, REPO, month) is False  # one waits already
    assert warm.ask_for_warm(built, REPO.upper(), month) is False  # the same repository
    assert warm.ask_for_warm(built, REPO, "2026-01") is True  # another month
    scheduled = ScheduledJobRegistry(queue=queue, connection=redis)  # type: ignore[no-untyped-call]
    assert queue.count == 0  # each waits WARM_DELAY: a burst of batches is warmed once
    jobs = [queue.fetch_job(job_id) for job_id in scheduled.get_job_ids()]
    assert [job.func_name for job in jobs if job is not None] == [WARM_FUNCTION] * 2
    due = scheduled.get_scheduled_time(scheduled.get_job_ids()[0]).timestamp()
    assert time.time() + warm.WARM_DELAY - 2 < due <= time.time() + warm.WARM_DELAY
    assert 0 < redis.ttl(warm.waiting_key(REPO, month)) <= warm.WAITING_TTL
    for each in (month, "2026-01"):
        rested(redis, each)
    assert release_due_jobs(app, at=due + 1) == 2
    run_jobs(app)
    assert queue.count == 0
    assert not redis.exists(warm.waiting_key(REPO, month))  # the job took it: the next change asks again
    assert all(redis.exists(key) for key in warm_keys(redis, built).values())
    # The month keeps changing: its next warm starts WARM_EVERY after the last one started, not before.
    started = float(redis.get(warm.last_key(REPO, month)))
    assert time.time() - 60 < started <= time.time()
    assert warm.ask_for_warm(built, REPO, month) is True
    ids = [job_id for job_id in scheduled.get_job_ids() if job_id not in {job.id for job in jobs if job}]
    assert len(ids) == 1
    due = scheduled.get_scheduled_time(ids[0]).timestamp()
    assert started + warm.WARM_EVERY - 2 < due <= started + warm.WARM_EVERY + 1
    # A month warmed long ago (or never): WARM_DELAY after the change.
    redis.set(warm.last_key(REPO, month), started - 10 * warm.WARM_EVERY)
    redis.delete(warm.waiting_key(REPO, month))
    assert warm.ask_for_warm(built, REPO, month) is True
    later = [job_id for job_id in scheduled.get_job_ids() if job_id not in {*ids, *(job.id for job in jobs if job)}]
    due = scheduled.get_scheduled_time(later[0]).timestamp()
    assert time.time() + warm.WARM_DELAY - 2 < due <= time.time() + warm.WARM_DELAY


def rested(redis: Redis, month: str, seconds: float = warm.WARM_DELAY + 1) -> None:
    """The month's last change `seconds` ago, as if the deliveries had stopped then."""
    redis.set(warm.changed_key(REPO, month), time.time() - seconds)


def test_a_month_that_keeps_changing_is_warmed_once_it_rests_or_at_the_latest_warm_longest_after(
    app: Flask, client: FlaskClient, built: Services
) -> None:
    """Under a stream a warm is out of date at once and costs the workers a big month's read: the job waits
    until the month has had no change for WARM_DELAY, scheduling itself again (still the only one waiting),
    but waits no longer than WARM_LONGEST after the change that asked for it."""
    deliver(client, app, 1, "Add a paged KV cache for inference")
    month = str(this_month())
    queue = built.records_queue
    redis = built.require_redis()
    redis.flushdb()
    scheduled = ScheduledJobRegistry(queue=queue, connection=redis)  # type: ignore[no-untyped-call]

    def run_the_due_job() -> str:
        """Release the waiting warm job now, whenever it is due, and run it; what it said."""
        (job_id,) = scheduled.get_job_ids()
        assert release_due_jobs(app, at=scheduled.get_scheduled_time(job_id).timestamp() + 1) == 1
        run_jobs(app)
        job = queue.fetch_job(job_id)
        assert job is not None
        return str(job.return_value())

    assert warm.ask_for_warm(built, REPO, month) is True
    rested(redis, month, 3.0)  # a batch 3 s ago: the month is still changing
    said = run_the_due_job()
    assert "warmed once it rests" in said, said
    assert not any(redis.exists(key) for key in warm_keys(redis, built).values())  # nothing read
    assert redis.exists(warm.waiting_key(REPO, month))  # it waits again, the only one
    (job_id,) = scheduled.get_job_ids()
    due = scheduled.get_scheduled_time(job_id).timestamp()
    assert time.time() + warm.WARM_DELAY - 3 - 2 < due <= time.time() + warm.WARM_DELAY - 3 + 1
    assert warm.ask_for_warm(built, REPO, month) is False  # another batch: the waiting job will see it
    rested(redis, month)
    assert "earlier cutoffs grouped" in run_the_due_job()
    assert all(redis.exists(key) for key in warm_keys(redis, built).values())
    assert not redis.exists(warm.waiting_key(REPO, month))
    assert scheduled.get_job_ids() == []
    # A month that never rests is warmed WARM_LONGEST after the change that asked for the warm.
    redis.flushdb()
    assert warm.ask_for_warm(built, REPO, month) is True
    asked = time.time() - warm.WARM_LONGEST - 1
    redis.set(warm.waiting_key(REPO, month), asked)
    rested(redis, month, 0.5)
    assert "earlier cutoffs grouped" in run_the_due_job()
    assert all(redis.exists(key) for key in warm_keys(redis, built).values())


def test_the_job_passes_over_the_earlier_cutoffs_of_a_month_that_rested_not_of_one_in_a_stream(
    app: Flask, client: FlaskClient, built: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    deliver(client, app, 1, "Add a paged KV cache for inference")
    month = str(this_month())
    redis = built.require_redis()
    asked: list[bool] = []

    def recorded(services: Services, full_name: str, month: str, *, rested: bool = False) -> None:
        asked.append(rested)

    monkeypatch.setattr(warm, "warm_month", recorded)
    rested(redis, month)  # no change for longer than WARM_DELAY
    warm_job(REPO, month)
    redis.set(warm.waiting_key(REPO, month), time.time() - warm.WARM_LONGEST - 1)
    rested(redis, month, 0.5)  # still changing, but asked WARM_LONGEST ago: warmed in the stream
    warm_job(REPO, month)
    redis.delete(warm.changed_key(REPO, month))  # no change on record (expired): nothing is changing
    warm_job(REPO, month)
    assert asked == [True, False, True]


def test_the_job_says_what_it_did(app: Flask, client: FlaskClient, built: Services) -> None:
    deliver(client, app, 1, "Add a paged KV cache for inference")
    month = str(this_month())
    built.require_redis().flushdb()
    assert warm_job(REPO, month).endswith(f"{len(DOCUMENTS)} rendered, 0 cached")
    assert warm_job(REPO, month).endswith(f"0 rendered, {len(DOCUMENTS)} cached")
    assert warm_job("someone/else", month) == f"nothing to warm for {month} of someone/else"


def deliver_in(client: FlaskClient, app: Flask, number: int, title: str, opened: datetime) -> None:
    story = PullRequestStory(number, opened, repo=REPO, title=title).opened()
    for d in story.deliveries:
        assert post(client, d.body, d.event, d.delivery_id).status_code == 202
    run_jobs(app)


def test_the_earlier_cutoffs_of_a_month_are_grouped_at_most_every_so_often(
    app: Flask, client: FlaskClient, built: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    last_month = Month.parse((this_month().first_day - timedelta(days=1)).strftime("%Y-%m"))
    start = datetime.fromtimestamp(month_window(last_month, last_month.first_day, TIMEZONE).start, UTC)
    titles = ["Add a paged KV cache for inference", "Paged KV cache: evict by recency", "Speed up the data loader"]
    for number, (day, title) in enumerate(zip((2, 9, 19), titles, strict=True), start=1):
        deliver_in(client, app, number, title, start + timedelta(days=day, hours=3))
    month = str(last_month)
    redis = built.require_redis()
    redis.flushdb()
    clusters.forget()
    warmed = warm_month(built, REPO, month)
    assert warmed is not None and warmed.cutoff == last_month.last_day.isoformat()
    assert warmed.earlier == last_month.last_day.day - 1  # every day before the month-to-date cutoff
    assert 0 < redis.ttl(warm.earlier_key(REPO, month)) <= warm.EARLIER_EVERY

    def at(day: int, cache: Redis | None) -> bytes:
        cutoff = last_month.first_day.replace(day=day).isoformat()
        request = resolve(built, REPO, month, cutoff)
        return rendered_bytes(built, request, Document("md", "en"), cache=cache)

    expected = {day: at(day, None) for day in (5, 12, 25)}  # computed from nothing, clustering included
    clusters.forget()

    def no_clustering(items: Sequence[clusters.Item]) -> tuple[clusters.Group, ...]:
        if items:
            raise AssertionError("a kept grouping was computed again")
        return ()

    monkeypatch.setattr(clusters, "group", no_clustering)
    for day, markdown in expected.items():
        assert at(day, redis) == markdown  # the workers kept that cutoff's grouping
    # Within EARLIER_EVERY, the next warm in a stream does not pass over them again; after it, or once the month
    # has rested, a pass clusters nothing.
    assert warm_month(built, REPO, month).earlier == 0  # type: ignore[union-attr]
    assert warm_month(built, REPO, month, rested=True).earlier == last_month.last_day.day - 1  # type: ignore[union-attr]
    assert warm_month(built, REPO, month).earlier == 0  # type: ignore[union-attr]
    redis.delete(warm.earlier_key(REPO, month))
    assert warm_month(built, REPO, month).earlier == last_month.last_day.day - 1  # type: ignore[union-attr]
