"""tracker.reports.digests: a month's digest kept by the warm job is what a request at any cutoff of the
month reads instead of the database, only while the month is as it was when the digest was read; the next
change makes it a miss and the request reads the database again. Real app, Redis and ledger."""

from __future__ import annotations

import json
import zlib
from dataclasses import fields
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from bench.fixtures.paths import require_shared

require_shared()

from tests.reports.test_warm import REPO, TIMEZONE, deliver, this_month  # noqa: E402
from tracker.core import clusters  # noqa: E402
from tracker.core.attributes import AttributeVersion  # noqa: E402
from tracker.core.groups import display_title  # noqa: E402
from tracker.core.themes import is_auxiliary  # noqa: E402
from tracker.core.titles import clean_title  # noqa: E402
from tracker.reports import digests  # noqa: E402
from tracker.reports.cache import rendered_bytes  # noqa: E402
from tracker.reports.digests import digest_key, month_ends, month_windows  # noqa: E402
from tracker.reports.loading import resolve  # noqa: E402
from tracker.reports.render import Document  # noqa: E402
from tracker.reports.warm import warm_month  # noqa: E402
from tracker.services import Services  # noqa: E402
from tracker.web.context import services  # noqa: E402


@pytest.fixture
def built(app: Flask) -> Any:
    with app.app_context():
        yield services()


def forget_memos() -> None:
    clusters.forget()
    digests.forget_held()
    for function in (display_title, clean_title, is_auxiliary):
        function.cache_clear()


def at_cutoff(built: Services, cutoff: str | None, cache: bool) -> dict[str, Any]:
    """The JSON at `cutoff`, as a process that never read the month answers it."""
    clusters.forget()
    digests.forget_held()
    request = resolve(built, REPO, str(this_month()), cutoff)
    data = rendered_bytes(built, request, Document("json", "en"), cache=built.redis if cache else None)
    document: dict[str, Any] = json.loads(data)
    return document


def titles(document: dict[str, Any]) -> list[str]:
    return sorted(pr["title"] for pr in document["pull_requests"])


def test_the_warm_job_keeps_the_digest_every_cutoff_reads_until_the_month_changes(
    app: Flask, client: FlaskClient, built: Services
) -> None:
    deliver(client, app, 1, "Add a paged KV cache for inference")
    month = str(this_month())
    redis = built.require_redis()
    redis.flushdb()
    key = digest_key(built, resolve(built, REPO, month, None))
    assert not redis.exists(key)
    warm_month(built, REPO, month)
    kept = redis.hgetall(key)
    assert kept
    # Every cutoff of the month reads it: a digest changed by hand shows in the answer (then put back).
    title = [field.name for field in fields(AttributeVersion)].index("title")
    # (The month's versions, each on a line of its own after its other tables, in its `paths` field.)
    tables, *versions = zlib.decompress(kept[b"paths"]).split(b"\n")
    assert versions
    altered = []
    for line in versions:
        values = json.loads(line)
        values[title] = "Read from the digest"
        altered.append(json.dumps(values).encode())
    redis.hset(key, "paths", zlib.compress(b"\n".join([tables, *altered])))
    redis.delete(*redis.scan_iter(match="tracker:render:*"))
    assert titles(at_cutoff(built, None, cache=True)) == ["Read from the digest"]
    redis.hset(key, mapping=kept)
    redis.delete(*redis.scan_iter(match="tracker:render:*"))
    assert at_cutoff(built, None, cache=True) == at_cutoff(built, None, cache=False)
    # The next delivery moves the month's version: the digest is a miss until the next warm.
    deliver(client, app, 2, "Speed up the data loader")
    assert digest_key(built, resolve(built, REPO, month, None)) != key
    assert titles(at_cutoff(built, None, cache=True)) == [
        "Add a paged KV cache for inference",
        "Speed up the data loader",
    ]
    warm_month(built, REPO, month)
    assert not redis.exists(key)  # the old version's digest is gone
    assert redis.exists(digest_key(built, resolve(built, REPO, month, None)))
    assert at_cutoff(built, None, cache=True) == at_cutoff(built, None, cache=False)


def test_month_ends_are_the_local_midnights_after_each_day() -> None:
    ends = month_ends("2026-02", "Asia/Shanghai")
    assert len(ends) == 28
    assert ends[0] == 1769961600  # 2026-02-02 00:00 in Shanghai = 2026-02-01 16:00 UTC
    assert all(later - earlier == 86400 for earlier, later in zip(ends, ends[1:], strict=False))
    assert len(month_ends("2026-03", "America/New_York")) == 31
    assert 82800 in {
        b - a
        for a, b in zip(
            month_ends("2026-03", "America/New_York"), month_ends("2026-03", "America/New_York")[1:], strict=False
        )
    }  # the spring-forward day has 23 hours


def test_every_document_read_from_the_digest_is_the_one_the_database_gives(
    app: Flask, client: FlaskClient, built: Services
) -> None:
    """The Markdown and the HTML are made from a snapshot without each PR's evidence (they do not show it);
    the JSON with it; with what the worker computed of the titles and paths. Each is byte for byte the
    document made from the database."""
    deliver(client, app, 1, "Add a paged KV cache for inference")
    deliver(client, app, 2, "Speed up the data loader")
    month = str(this_month())
    redis = built.require_redis()
    redis.flushdb()
    warm_month(built, REPO, month)
    assert redis.exists(digest_key(built, resolve(built, REPO, month, None)))
    request = resolve(built, REPO, month, None)
    for fmt, lang, detail in (
        ("json", "en", "full"),
        ("json", "en", "summary"),
        ("md", "en", "full"),
        ("md", "zh-CN", "full"),
        ("html", "en", "full"),
        ("html", "zh-CN", "full"),
    ):
        redis.delete(*redis.scan_iter(match="tracker:render:*"))
        forget_memos()  # the titles and paths from the digest's offer (tracker.core.memo)
        from_digest = rendered_bytes(built, request, Document(fmt, lang, detail), cache=redis)
        forget_memos()  # computed here
        from_database = rendered_bytes(built, request, Document(fmt, lang, detail), cache=None)
        assert from_digest == from_database, (fmt, lang, detail)
    assert b'"evidence"' in rendered_bytes(built, request, Document("json", "en"), cache=redis)


def test_a_digest_read_while_the_month_moved_on_is_patched_from_where_its_read_began(
    app: Flask, client: FlaskClient, built: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a stream a big month's read outlasts a few batches: the digest then holds each PR as one of the
    versions it was read between had it. Later requests read again every PR changed since the read began
    (here a PR opened and one retitled while it ran), and give what the database gives."""
    from tracker.reports import digests

    deliver(client, app, 1, "Add a paged KV cache for inference")
    deliver(client, app, 2, "Speed up the data loader")
    month = str(this_month())
    redis = built.require_redis()
    redis.flushdb()
    reading = digests.read_digest

    def read_during_a_batch(*args: Any, **kwargs: Any) -> Any:
        digest = reading(*args, **kwargs)
        deliver(client, app, 3, "Fuse the MoE router kernels")  # committed while the digest is read
        return digest

    monkeypatch.setattr(digests, "read_digest", read_during_a_batch)
    before = built.state.month_version(REPO, month)[0]
    digests.keep_digest(built, redis, resolve(built, REPO, month, None))
    monkeypatch.undo()
    through = built.state.month_version(REPO, month)[0]
    assert through > before
    deliver(client, app, 4, "Checkpoint the optimizer state asynchronously")
    window = month_windows(month, TIMEZONE)[this_month_index()]
    patched = digests._patched_window(
        redis, built.state, built.config, REPO, window, *built.state.month_version(REPO, month), True
    )
    assert patched is not None  # the base was kept, and used
    assert titles(at_cutoff(built, None, cache=True)) == titles(at_cutoff(built, None, cache=False))
    assert len(titles(at_cutoff(built, None, cache=True))) == 4
    assert at_cutoff(built, None, cache=True) == at_cutoff(built, None, cache=False)
    # A request at a version older than the end of the read does not use it.
    generation = built.state.month_version(REPO, month)[1]
    old = digests._patched_window(redis, built.state, built.config, REPO, window, through - 1, generation, True)
    assert old is None


def this_month_index() -> int:
    """The position of today's cutoff among the month's (the default cutoff of the month to date)."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    return datetime.now(ZoneInfo(TIMEZONE)).day - 1
