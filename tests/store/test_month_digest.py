"""tracker.store.month_digest: a month's inputs at every cutoff read at once equal, cutoff by cutoff, what
`MonthState.month_inputs` reads from the database (the oracle), before and after JSON (encode, decode).
A real month (60 real Megatron-LM PRs of May 2026 with made-up lives: pushes, retitles, labels, merges,
closes, PRs still open) through the webhook and the worker's jobs, the files of every head fetched from
the fake GitHub, one head GitHub no longer has; on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from flask import Flask
from sqlalchemy import select, update

from tests.paths import require_shared

require_shared()

from tests.scenario import REPO, deliver, megatron_month  # noqa: E402
from tracker.core.timeline import Fact  # noqa: E402
from tracker.reports.digests import month_ends  # noqa: E402
from tracker.store.heads import UNAVAILABLE  # noqa: E402
from tracker.store.month_digest import decode, encode, read_digest  # noqa: E402
from tracker.store.month_state import MonthInputs  # noqa: E402
from tracker.store.schema import heads  # noqa: E402
from tracker.web.context import services  # noqa: E402

MONTH = "2026-05"


def comparable(inputs: MonthInputs) -> tuple[Any, ...]:
    """The inputs with each timeline in one order (the fold sorts them; the database gives any order)."""
    timelines = {number: sorted(facts, key=Fact.sort_key.fget) for number, facts in inputs.timelines.items()}  # type: ignore[arg-type]
    return timelines, inputs.versions, inputs.verdicts, inputs.unavailable, inputs.paths


def test_the_digest_gives_what_the_database_gives_at_every_cutoff(app: Flask, github: Any) -> None:
    client = app.test_client()
    deliver(megatron_month(MONTH), app, client, github)
    with app.app_context():
        s = services()
        state = s.state
        with state.engine.begin() as conn:  # one head GitHub no longer has (its PR was deleted, say)
            gone = conn.execute(select(heads.c.number, heads.c.head_sha).order_by(heads.c.number).limit(1)).first()
            assert gone is not None
            conn.execute(
                update(heads)
                .where(heads.c.number == gone.number, heads.c.head_sha == gone.head_sha)
                .values(source=UNAVAILABLE)
            )
        ends = month_ends(MONTH, s.config.timezone_for(REPO))
        digest = read_digest(state.engine, REPO, MONTH, ends)
        again = decode(encode(digest))
        assert again == digest
        assert len(ends) == 31
        checked = 0
        for end in ends:
            oracle = state.month_inputs(REPO, MONTH, end)
            for read in (digest.inputs_at(end), again.inputs_at(end)):
                assert read is not None
                assert comparable(read) == comparable(oracle)
            checked += len(oracle.versions)
        assert checked > 31 * 10
        assert any(digest.inputs_at(end).unavailable for end in ends)  # type: ignore[union-attr]
        assert any(digest.inputs_at(end).paths for end in ends)  # type: ignore[union-attr]
        assert digest.inputs_at(ends[0] + 1) is None  # not a window end of this month
