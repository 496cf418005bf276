"""`tracker rebuild` re-derives the same state from the raw ledger."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from flask import Flask
from flask.testing import FlaskClient

from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import needs_shared
from tests.support.app import post, run_jobs
from tracker.reports.loading import load_snapshot, snapshot_json
from tracker.store.rebuild import rebuild
from tracker.web.context import services

pytestmark = needs_shared

MONTHS = [("2026-09", "2026-09-13"), ("2026-09", None), ("2026-10", "2026-10-05"), ("2026-08", None)]


def many_stories(seed: int = 7) -> list[PullRequestStory]:
    rng = random.Random(seed)
    start = datetime(2026, 8, 25, tzinfo=UTC)
    result = []
    for number in range(1, 41):
        opened = start + timedelta(hours=rng.randrange(0, 24 * 40))
        story = PullRequestStory(number, opened, base=rng.choice(["main", "dev"])).opened()
        moment = opened
        for _ in range(rng.randrange(0, 4)):
            moment += timedelta(hours=rng.randrange(1, 72))
            story.pushed(moment)
        moment += timedelta(hours=rng.randrange(1, 48))
        story.labeled(moment, rng.choice(["bug", "enhancement", "moe"]))
        ending = rng.random()
        moment += timedelta(hours=rng.randrange(1, 96))
        if ending < 0.4:
            story.merged(moment)
        elif ending < 0.6:
            story.closed(moment)
            if rng.random() < 0.5:
                story.reopened(moment + timedelta(hours=rng.randrange(1, 200)))
        result.append(story)
    return result


def snapshots(app: Flask) -> list[str]:
    with app.app_context():
        s = services()
        return [snapshot_json(load_snapshot(s, "NVIDIA/Megatron-LM", month, cutoff)) for month, cutoff in MONTHS]


def test_rebuild_gives_byte_identical_snapshots(app: Flask, client: FlaskClient) -> None:
    for story in many_stories():
        for d in story.deliveries:
            assert post(client, d.body, d.event, d.delivery_id).status_code == 202
    run_jobs(app)
    before = snapshots(app)
    assert sum(len(s) for s in before) > 5000  # real content, not empty months
    with app.app_context():
        s = services()
        received = s.ledger.counts().received
        processed, failed, _ = rebuild(s.ledger, s.state, s.config)
    assert (processed, failed) == (received, 0)
    assert snapshots(app) == before


def test_rebuild_recovers_from_lost_derived_state(app: Flask, client: FlaskClient) -> None:
    for story in many_stories(seed=11)[:10]:
        for d in story.deliveries:
            post(client, d.body, d.event, d.delivery_id)
    run_jobs(app)
    before = snapshots(app)
    with app.app_context():
        s = services()
        s.state.drop_and_recreate()  # every derived table empty
        assert s.state.repository_names() == []
        rebuild(s.ledger, s.state, s.config)
    assert snapshots(app) == before


def test_a_rebuild_killed_half_way_leaves_the_ledger_outdated_and_the_next_one_finishes_it(
    app: Flask, client: FlaskClient
) -> None:
    """Before: the derived tables were marked current when they were emptied, so a rebuild killed
    half-way (a carry-over of an older ledger, `tracker rebuild`) left half a month served as whole,
    and nothing at the next start rebuilt it."""
    from tracker.store.database import derived_schema_outdated

    for story in many_stories(seed=12)[:10]:
        for d in story.deliveries:
            post(client, d.body, d.event, d.delivery_id)
    run_jobs(app)
    before = snapshots(app)
    with app.app_context():
        s = services()
        history = type(s.ledger)
        every_batch = history.iter_pull_request_deliveries

        class Killed(Exception):
            pass

        def dies_after_the_first_batch(ledger: object) -> object:
            yield next(every_batch(ledger))  # type: ignore[arg-type]
            raise Killed

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(history, "iter_pull_request_deliveries", dies_after_the_first_batch)
            with pytest.raises(Killed):
                rebuild(s.ledger, s.state, s.config)
        assert derived_schema_outdated(s.state.engine) is True
        rebuild(s.ledger, s.state, s.config)
        assert derived_schema_outdated(s.state.engine) is False
    assert snapshots(app) == before
