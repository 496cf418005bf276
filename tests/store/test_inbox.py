"""The webhook's inbox (tracker.store.inbox): on SQLite `Ledger.receive` writes a delivery to a database
file of its own, where it is accepted and pending as one of the ledger itself; the drain moves it into
the ledger (`Ledger.take_inbox`). A redelivery or a replayed body is refused wherever its first copy
is, a move interrupted between its two transactions leaves the same ledger when done again, and
several web processes receiving while another moves lose nothing and store nothing twice."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import sqlite3
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from bench.fixtures.paths import needs_shared
from tests.store.test_ledger import story_deliveries, with_id
from tests.support.app import post, run_jobs, running_app
from tests.workers.test_jobs import EXPECTED_STATS, post_all, september, stories
from tracker.settings import Settings
from tracker.store.database import connect
from tracker.store.inbox import COLUMNS, inbox_path
from tracker.store.ledger import PENDING, PROCESSED, Delivery, Ledger
from tracker.store.month_state import MonthState
from tracker.store.schema import deliveries, delivery_digests
from tracker.web.context import services


def digest(delivery: Delivery) -> str:
    return hashlib.sha256(delivery.body).hexdigest()


def ledger_rows(engine: Engine) -> dict[str, str]:
    """id -> status of the ledger's own table (not the inbox)."""
    with engine.connect() as conn:
        return dict(conn.execute(select(deliveries.c.id, deliveries.c.status)).all())


def inbox_ids(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("SELECT id FROM inbox ORDER BY seq")]


def test_the_inbox_is_a_file_beside_a_sqlite_ledger_only(sqlite_engine: Engine, engine: Engine) -> None:
    assert inbox_path(sqlite_engine) == Path(str(sqlite_engine.url.database)).with_name("ledger.inbox.sqlite3")
    if engine.dialect.name == "postgresql":
        assert inbox_path(engine) is None and Ledger(engine, inbox=True).inbox is None
    assert inbox_path(connect("sqlite://")) is None  # in memory: nothing to put beside it


def test_a_received_delivery_is_pending_until_moved_then_the_ledgers(sqlite_engine: Engine) -> None:
    ledger = Ledger(sqlite_engine, inbox=True)
    opened, pushed, labeled, merged = story_deliveries()
    for delivery in (opened, pushed, labeled):
        assert ledger.receive(delivery, digest(delivery))
    ledger.store(merged, digest(merged))  # stored directly (a backfill, the demo): the ledger's at once

    assert ledger_rows(sqlite_engine) == {merged.id: PENDING}
    assert inbox_ids(inbox_path(sqlite_engine)) == [opened.id, pushed.id, labeled.id]
    counts = ledger.counts()
    assert (counts.received, counts.pending, counts.processed) == (4, 4, 0)
    assert ledger.pending_for("nvidia/megatron-lm") == ledger.pending_for(opened.repo or "") == 4
    assert ledger.status_of(pushed.id) == PENDING
    assert ledger.get(pushed.id) == pushed  # the same delivery, whichever table holds it
    assert ledger.ids_with_status(PENDING, tried=False) == [opened.id, pushed.id, labeled.id, merged.id]
    assert ledger.ids_with_status(PENDING, tried=True) == []
    assert ledger.ids_with_status(PENDING, received_before=pushed.received_at) == [opened.id]
    assert ledger.accepted_ids() == {opened.id, pushed.id, labeled.id, merged.id}
    assert ledger.fresh_pending(10) == [merged]  # the drain moves the inbox first

    assert ledger.take_inbox(2) == 2
    assert ledger.take_inbox(10) == 1
    assert ledger.take_inbox(10) == 0
    assert inbox_ids(inbox_path(sqlite_engine)) == []
    assert ledger.fresh_pending(10) == [opened, pushed, labeled, merged]  # arrival order
    assert ledger.counts().pending == 4
    assert MonthState(sqlite_engine).apply_batch([(d.id, None) for d in (opened, pushed, labeled, merged)])
    assert set(ledger_rows(sqlite_engine).values()) == {PROCESSED}
    with sqlite_engine.connect() as conn:
        kept = set(conn.execute(select(delivery_digests.c.delivery_id)).scalars())
    assert kept == {opened.id, pushed.id, labeled.id, merged.id}  # each body's digest came along


def test_a_redelivery_or_a_replayed_body_is_refused_in_the_inbox_and_after_the_move(sqlite_engine: Engine) -> None:
    ledger = Ledger(sqlite_engine, inbox=True)
    opened, pushed, *_ = story_deliveries()
    assert ledger.receive(opened, digest(opened))
    assert not ledger.receive(opened, digest(opened))  # the same id, in the inbox
    assert not ledger.receive(with_id(opened, "another-id"), digest(opened))  # the same body, in the inbox
    ledger.take_inbox(10)
    assert not ledger.receive(opened, digest(opened))  # now in the ledger
    assert not ledger.receive(with_id(opened, "yet-another-id"), digest(opened))
    assert ledger.receive(pushed, digest(pushed))
    assert ledger.accepted_ids() == {opened.id, pushed.id}
    assert ledger.counts().received == 2


def test_a_move_interrupted_before_the_inbox_forgot_is_done_again_to_the_same_ledger(sqlite_engine: Engine) -> None:
    ledger = Ledger(sqlite_engine, inbox=True)
    story = story_deliveries()
    for delivery in story:
        ledger.receive(delivery, digest(delivery))
    assert ledger.inbox is not None
    moved = ledger.inbox.oldest(10)
    ledger.take_inbox(10)
    MonthState(sqlite_engine).apply(story[0].id, None)  # one of them processed since
    # A crash between the ledger's commit and the inbox's delete: the rows are still in the inbox.
    with sqlite3.connect(inbox_path(sqlite_engine)) as conn:
        conn.executemany(f"INSERT INTO inbox (seq, {', '.join(COLUMNS)}) VALUES ({', '.join('?' * 12)})", moved)
    assert ledger.counts().received == 8  # counted twice until moved again: the rows are in both
    assert ledger.take_inbox(10) == 4
    assert ledger_rows(sqlite_engine) == {story[0].id: PROCESSED, **{d.id: PENDING for d in story[1:]}}
    assert inbox_ids(inbox_path(sqlite_engine)) == []
    assert ledger.counts().received == 4


def test_receive_on_postgresql_is_the_ledgers_own_store(engine: Engine) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL has no inbox")
    ledger = Ledger(engine, inbox=True)
    opened, *_ = story_deliveries(number=4242)
    assert ledger.receive(opened, digest(opened))
    assert not ledger.receive(opened, digest(opened))
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).where(deliveries.c.id == opened.id)).scalar_one() == 1
    assert ledger.take_inbox(10) == 0


# --- several processes ---------------------------------------------------------------------------------

RECEIVERS, PER_RECEIVER = 3, 40


def _receive(url: str, worker: int, results: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    engine = connect(url)
    ledger = Ledger(engine, inbox=True)
    story = story_deliveries()
    accepted = []
    for i in range(PER_RECEIVER):
        # Every id sent by two or more of the processes at about the same time.
        base = story[i % len(story)]
        shared = f"d{(worker + i) % 2}-{i}"
        body = base.body + f" {shared}".encode()  # a distinct body per id (the digest is the body's)
        delivery = with_id(Delivery(**{**base.__dict__, "body": body}), shared, base.received_at + i)
        if ledger.receive(delivery, hashlib.sha256(body).hexdigest()):
            accepted.append(shared)
    engine.dispose()
    results.put(accepted)


def _move(url: str, stop: multiprocessing.Event, results: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    engine = connect(url)
    ledger = Ledger(engine)
    moved = 0
    deadline = time.monotonic() + 300  # a mover whose test died before saying stop ends by itself
    while not stop.is_set() and time.monotonic() < deadline:
        moved += ledger.take_inbox(7)
    moved += ledger.take_inbox(10_000)
    engine.dispose()
    results.put(moved)


@pytest.mark.system
@needs_shared
def test_receivers_and_a_mover_in_several_processes_lose_nothing_and_keep_each_id_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.sqlite3'}"
    connect(url).dispose()
    context = multiprocessing.get_context("spawn")
    results, moves, stop = context.Queue(), context.Queue(), context.Event()
    mover = context.Process(target=_move, args=(url, stop, moves))
    mover.start()
    receivers = [context.Process(target=_receive, args=(url, w, results)) for w in range(RECEIVERS)]
    for process in receivers:
        process.start()
    accepted = [delivery_id for _ in receivers for delivery_id in results.get(timeout=120)]
    for process in receivers:
        process.join(timeout=60)
    stop.set()
    moved = moves.get(timeout=120)
    mover.join(timeout=60)

    expected = {f"d{(w + i) % 2}-{i}" for w in range(RECEIVERS) for i in range(PER_RECEIVER)}
    assert sorted(accepted) == sorted(expected)  # each id accepted once, by one of the processes sending it
    engine = connect(url)
    try:
        assert set(ledger_rows(engine)) == expected
        assert moved == len(expected)
        assert inbox_ids(tmp_path / "ledger.inbox.sqlite3") == []
    finally:
        engine.dispose()


# --- through the webhook and the drain -----------------------------------------------------------------


@needs_shared
def test_the_webhook_with_the_inbox_on_gives_the_month_a_webhook_into_the_ledger_gives(
    settings: Settings, tmp_path: Path
) -> None:
    """TRACKER_INBOX: every delivery waits in the inbox (not in the ledger) until the drain, a redelivery
    is refused there, and the month is the one of the same deliveries written straight to the ledger
    (EXPECTED_STATS, counted by hand from the stories)."""
    documents = []
    for inbox in (True, False):
        data = tmp_path / f"inbox-{inbox}"
        chosen = settings.model_copy(
            update={"inbox": inbox, "data_dir": data, "database_url": f"sqlite:///{data / 'ledger.sqlite3'}"}
        )
        with running_app(chosen) as app:
            client = app.test_client()
            total = post_all(client)
            first = stories()[0].deliveries[0]
            again = post(client, first.body, first.event, first.delivery_id)
            assert again.status_code == 200 and again.get_json()["status"] == "duplicate"
            with app.app_context():
                ledger = services().ledger
                engine = ledger.engine
                assert ledger.counts().pending == total
                assert len(ledger_rows(engine)) == (0 if inbox else total)
                if inbox:
                    assert len(inbox_ids(inbox_path(engine))) == total
                else:
                    assert not inbox_path(engine).exists()
            run_jobs(app)
            with app.app_context():
                assert services().ledger.counts().processed == total
                assert set(ledger_rows(engine).values()) == {PROCESSED}
            if inbox:
                assert inbox_ids(inbox_path(engine)) == []
            document = september(app)
            assert json.loads(document)["stats"] == EXPECTED_STATS
            documents.append(document)
    assert documents[0] == documents[1]


def test_without_the_inbox_on_receive_writes_the_ledger_and_a_left_inbox_is_still_moved(sqlite_engine: Engine) -> None:
    opened, pushed, *_ = story_deliveries()
    Ledger(sqlite_engine, inbox=True).receive(opened, digest(opened))  # the inbox on, then turned off
    ledger = Ledger(sqlite_engine)
    assert ledger.receive(pushed, digest(pushed))
    assert ledger_rows(sqlite_engine) == {pushed.id: PENDING}
    assert ledger.counts().pending == 2
    # A redelivery of what the inbox still holds is stored again (only the inbox's writers look there),
    # and the move keeps one of the two: processed once either way.
    assert ledger.receive(opened, digest(opened))
    assert ledger.take_inbox(10) == 1
    assert ledger_rows(sqlite_engine) == {opened.id: PENDING, pushed.id: PENDING}
    assert ledger.counts().pending == 2
