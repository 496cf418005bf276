"""tracker.store.month_digest: a month's snapshot at every cutoff, read and folded per PR at once, equals,
cutoff by cutoff, what `build_snapshot` makes of what `MonthState.month_inputs` reads from the database
(the oracle), with the same changed paths, before and after JSON (encode, decode).
A real month (60 real Megatron-LM PRs of May 2026 with made-up lives: pushes, retitles, labels, merges,
closes, PRs still open) through the webhook and the worker's jobs, the files of every head fetched from
the fake GitHub, one head GitHub no longer has, one whose files are not known yet; on SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from flask import Flask
from sqlalchemy import delete, select, tuple_, update

from tests.paths import require_shared

require_shared()

from tests.scenario import REPO, deliver, megatron_month  # noqa: E402
from tracker.core import memo  # noqa: E402
from tracker.core.classify import Category  # noqa: E402
from tracker.core.groups import display_title  # noqa: E402
from tracker.core.snapshot import build_snapshot  # noqa: E402
from tracker.core.themes import is_auxiliary  # noqa: E402
from tracker.core.titles import clean_title  # noqa: E402
from tracker.reports.digests import month_windows  # noqa: E402
from tracker.reports.loading import snapshot_json  # noqa: E402
from tracker.store.heads import UNAVAILABLE  # noqa: E402
from tracker.store.month_digest import (  # noqa: E402
    AUXILIARY,
    PATHS,
    encode,
    evidence_field,
    fold_encoded,
    read_digest,
)
from tracker.store.schema import head_verdicts, heads  # noqa: E402
from tracker.web.context import services  # noqa: E402

MONTH = "2026-05"


def test_the_digest_gives_what_the_database_gives_at_every_cutoff(app: Flask, github: Any) -> None:
    client = app.test_client()
    deliver(megatron_month(MONTH), app, client, github)
    with app.app_context():
        s = services()
        state = s.state
        windows = month_windows(MONTH, s.config.timezone_for(REPO))
        # One head GitHub no longer has (its PR was deleted, say): the head a PR has at the month's end, so
        # that some cutoff shows it (any stored head of a PR need not be: a push the same day passes it by).
        at_end = state.month_inputs(REPO, MONTH, windows[-1].end).versions
        with state.engine.begin() as conn:
            gone = conn.execute(
                select(heads.c.number, heads.c.head_sha)
                .where(tuple_(heads.c.number, heads.c.head_sha).in_([(n, v.head_sha) for n, v in at_end.items()]))
                .order_by(heads.c.number)
                .limit(1)
            ).first()
            assert gone is not None
            conn.execute(
                update(heads)
                .where(heads.c.number == gone.number, heads.c.head_sha == gone.head_sha)
                .values(source=UNAVAILABLE)
            )
            # and one head whose files are not fetched yet: its PR is pending while that head is its own
            waiting = conn.execute(
                select(head_verdicts.c.number, head_verdicts.c.head_sha)
                .where(head_verdicts.c.number != gone.number)
                .order_by(head_verdicts.c.number.desc())
                .limit(1)
            ).first()
            assert waiting is not None
            conn.execute(
                delete(head_verdicts).where(
                    head_verdicts.c.number == waiting.number, head_verdicts.c.head_sha == waiting.head_sha
                )
            )
        rules = s.config.rules_for(REPO)
        digest = read_digest(state.engine, REPO, MONTH, windows, rules)
        encoded = encode(digest)  # the fields of its Redis hash
        assert len(windows) == 31
        checked = 0
        categories = set()
        for index, window in enumerate(windows):
            inputs = state.month_inputs(REPO, MONTH, window.end)
            oracle = build_snapshot(
                REPO, window, inputs.timelines, inputs.versions, inputs.verdicts, rules, inputs.unavailable
            )
            numbers = {pr.status.number for pr in oracle.pull_requests}
            paths = {number: files for number, files in inputs.paths.items() if number in numbers}
            cut, table, evidence = encoded[str(index)], encoded[PATHS], encoded[evidence_field(index)]
            auxiliary = encoded[AUXILIARY]
            for folded in (digest.fold_at(REPO, window), fold_encoded(cut, table, auxiliary, evidence, REPO, window)):
                assert folded is not None
                assert folded == (oracle, paths)
                assert snapshot_json(folded[0]) == snapshot_json(oracle)  # the same bytes, key order and all
            # Without the evidence (for the Markdown and the HTML): the same but for it.
            for bare in (
                digest.fold_at(REPO, window, evidence=False),
                fold_encoded(cut, table, auxiliary, None, REPO, window, with_evidence=False),
            ):
                assert bare is not None
                assert [replace(pr, evidence={}) for pr in oracle.pull_requests] == list(bare[0].pull_requests)
                assert bare[0].stats == oracle.stats and bare[1] == paths
            checked += len(oracle.pull_requests)
            categories.update(pr.category for pr in oracle.pull_requests)
            if any(pr.evidence.get("rule") == "files_unavailable" for pr in oracle.pull_requests):
                categories.add("unavailable")
        assert checked > 31 * 10
        assert {Category.SUBSTANTIVE, Category.PENDING, "unavailable"} <= categories
        assert digest.fold_at(REPO, replace(windows[0], end=windows[0].end + 1)) is None  # not a window of the month
        table, auxiliary = encoded[PATHS], encoded[AUXILIARY]
        assert fold_encoded(encoded["0"], table, auxiliary, None, REPO, windows[0]) is None  # no evidence
        assert fold_encoded(encoded["1"], table, auxiliary, encoded["evidence:1"], REPO, windows[0]) is None  # day 2
        assert fold_encoded(None, table, auxiliary, encoded["evidence:0"], REPO, windows[0]) is None
        assert fold_encoded(encoded["0"], table, None, encoded["evidence:0"], REPO, windows[0]) is None
        # What it carries of each title and path is what this process computes without it (tracker.core.memo).
        memo.forget()
        assert digest.titles and digest.auxiliary
        for title, display, clean in digest.titles:
            assert (display_title.__wrapped__(title), clean_title.__wrapped__(title)) == (display, clean)
        assert all(is_auxiliary.__wrapped__(path) is judged for path, judged in digest.auxiliary.items())
        assert any(digest.auxiliary.values()) and not all(digest.auxiliary.values())
