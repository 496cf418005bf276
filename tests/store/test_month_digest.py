"""tracker.store.month_digest: a month's snapshot at every cutoff, read and folded per PR at once, equals,
cutoff by cutoff, what `build_snapshot` makes of what `MonthState.month_inputs` reads from the database
(the oracle), with the same changed paths, before and after JSON (encode, decode).
A real month (60 real Megatron-LM PRs of May 2026 with made-up lives: pushes, retitles, labels, merges,
closes, PRs still open) through the webhook and the worker's jobs, the files of every head fetched from
the fake GitHub, one head GitHub no longer has, one whose files are not known yet; on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace
from typing import Any

from flask import Flask
from sqlalchemy import delete, select, tuple_, update

from bench.fixtures.paths import require_shared

require_shared()

from bench.fixtures.scenario import REPO, megatron_month  # noqa: E402
from tests.support.app import deliver_month as deliver  # noqa: E402
from tracker.core import noise  # noqa: E402
from tracker.core.classify import Category  # noqa: E402
from tracker.core.descriptions import summary_sentence  # noqa: E402
from tracker.core.groups import body_references, display_title, normalise_title  # noqa: E402
from tracker.core.snapshot import build_snapshot  # noqa: E402
from tracker.core.themes import is_auxiliary  # noqa: E402
from tracker.core.titles import clean_title  # noqa: E402
from tracker.reports import digests  # noqa: E402
from tracker.reports.digests import month_windows  # noqa: E402
from tracker.reports.loading import resolve, snapshot_json  # noqa: E402
from tracker.reports.render import Document  # noqa: E402
from tracker.reports.request import MonthRequest  # noqa: E402
from tracker.store.heads import UNAVAILABLE  # noqa: E402
from tracker.store.month_digest import _VERSION_FIELDS as VERSION_FIELDS  # noqa: E402
from tracker.store.month_digest import (  # noqa: E402
    AUXILIARY,
    EVIDENCE,
    PATHS,
    encode,
    fold_encoded,
    read_digest,
)
from tracker.store.schema import head_verdicts, heads  # noqa: E402
from tracker.web.context import services  # noqa: E402

MONTH = "2026-05"


def with_descriptions(scenario: Any) -> Any:
    """The scenario with a description written as PR templates are on every third PR (a summary sentence to
    keep), the others' bodies as they were."""
    for story in scenario.stories[::3]:
        for position, delivery in enumerate(story.deliveries):
            payload = json.loads(delivery.body)
            title = payload["pull_request"]["title"]
            payload["pull_request"]["body"] = (
                f"# What does this PR do ?\n<!-- One line overview. -->\nMakes {title} work for long runs and adds "
                "its tests.\n\n## Pre-checks\n\n- [ ] I have added relevant unit tests\n"
            )
            story.deliveries[position] = dataclasses.replace(delivery, body=json.dumps(payload).encode())
    return scenario


def test_the_digest_gives_what_the_database_gives_at_every_cutoff(app: Flask, github: Any) -> None:
    client = app.test_client()
    deliver(with_descriptions(megatron_month(MONTH)), app, client, github)
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
            cut, table, evidence = encoded[str(index)], encoded[PATHS], encoded[EVIDENCE]
            auxiliary = encoded[AUXILIARY]
            for folded in (digest.fold_at(REPO, window), fold_encoded(cut, table, auxiliary, evidence, REPO, window)):
                assert folded is not None
                assert (folded.snapshot, folded.paths) == (oracle, paths)
                # with what the worker computed of every title and body it holds (checked against this process below)
                versions = [pr.version for pr in oracle.pull_requests if pr.version]
                assert {version.title for version in versions} <= set(folded.known["display_title"])
                assert {version.body for version in versions} <= set(folded.known["summary_sentence"])
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
        assert fold_encoded(encoded["1"], table, auxiliary, encoded[EVIDENCE], REPO, windows[0]) is None  # day 2
        assert fold_encoded(None, table, auxiliary, encoded[EVIDENCE], REPO, windows[0]) is None
        assert fold_encoded(encoded["0"], table, None, encoded[EVIDENCE], REPO, windows[0]) is None
        # What it carries of each title, body and path is what this process computes without it (tracker.core.memo).
        assert digest.titles and digest.auxiliary
        for title, display, clean, normalised, revert, upkeep in digest.titles:
            assert (display_title.__wrapped__(title), clean_title.__wrapped__(title)) == (display, clean)
            assert normalise_title.__wrapped__(title) == normalised
            parsed = noise._parse.__wrapped__(title)
            assert [parsed.depth, parsed.key, parsed.cut] == revert
            assert noise.upkeep_facts(title) == upkeep
        assert len(digest.body_facts) == len(digest.bodies)
        computed = [[summary_sentence(body) or "", sorted(body_references.__wrapped__(body))] for body in digest.bodies]
        assert computed == digest.body_facts
        assert any(sentence for sentence, _ in digest.body_facts)
        assert all(is_auxiliary.__wrapped__(path) is judged for path, judged in digest.auxiliary.items())
        # and each version's upkeep kind with its head's paths, as a report asks it of a change of one PR
        head_paths = {(n, sha): [digest.path_table[p] for p in positions] for n, sha, positions in digest.paths}
        kinds = []
        for number, held in digest.versions:
            for _, values in held:
                version = dict(zip(VERSION_FIELDS, values, strict=False))
                paths = sorted(set(head_paths.get((number, version["head_sha"]), [])))
                labels = sorted(set(version["labels"]))
                expected = noise._kind.__wrapped__(version["title"], tuple(paths), version["author"], tuple(labels))
                assert values[len(VERSION_FIELDS)] == expected, (number, version["title"])
                kinds.append(expected)
        assert any(kinds) and not all(kinds)
        assert any(digest.auxiliary.values()) and not all(digest.auxiliary.values())


def test_a_digest_some_versions_old_is_brought_up_to_date_by_reading_again_only_what_changed(
    app: Flask, github: Any, monkeypatch: Any
) -> None:
    """Under a stream of deliveries the month moves on many versions between two warm jobs: a request then
    reads the month's last digest and the PRs changed since (tracker.store.changes), and folds exactly what
    the database gives, at every cutoff, with and without the evidence. Deliveries arrive shuffled (late
    ones for PRs the digest holds, new PRs, redeliveries), head fetches land in between, and versions that
    change no PR (the narrator's prose) count too; a version whose changes are not recorded makes the
    request read the month whole."""
    import random

    from tests.support.app import post, run_jobs
    from tracker.reports.digests import cached_fold, forget_held, keep_digest
    from tracker.store.changes import changes_since
    from tracker.store.month_digest import MOST_CHANGED
    from tracker.store.schema import month_activity, month_changes

    scenario = megatron_month(MONTH, count=32, seed=5)
    for number, sha, paths in scenario.head_files():
        github.set_files(REPO, number, sha, paths)
    split = scenario.stories[len(scenario.stories) * 3 // 4].number
    deliveries = [(story.number, d) for story in scenario.stories for d in story.deliveries]
    early = [d for number, d in deliveries if number < split]
    rest = [d for number, d in deliveries if number >= split]
    rest += random.Random(3).sample(early, k=5)  # redelivered: nothing changes
    late = random.Random(4).sample(early, k=len(early) // 10)  # these arrive after the digest was kept
    early = [d for d in early if d not in late]
    rest = late + rest
    random.Random(5).shuffle(rest)
    client = app.test_client()
    kept_at = kept_after(app, early)
    with app.app_context():
        s = services()
        state, redis, timezone = s.state, s.require_redis(), s.config.timezone_for(REPO)
        windows = month_windows(MONTH, timezone)

        wholes = whole_reads(monkeypatch)

        def check() -> bool:
            """Whether the requests patched the digest (else each read its window whole), as a process that
            holds none of the month's windows (see the next test for one that does)."""
            forget_held()
            with state.engine.connect() as conn:
                changed = changes_since(conn, "nvidia/megatron-lm", MONTH, kept_at)[1]
                active = conn.execute(select(month_activity.c.number).where(month_activity.c.month == MONTH)).all()
            assert changed is not None
            patched = len(changed & {number for (number,) in active}) <= len(active) * MOST_CHANGED
            wholes.clear()
            for window in windows:
                assert_folds_as_the_database(s, window)  # two requests: with the evidence, then without
            assert len(wholes) == (0 if patched else 2 * len(windows))
            return patched

        seen = patched = 0
        for start in range(0, len(rest), 7):
            for d in rest[start : start + 7]:
                post(client, d.body, d.event, d.delivery_id)
            run_jobs(app)  # the batch, then the fetches of the heads it showed: versions of their own
            if start == 14:
                state.bump(REPO, MONTH)  # a version that changes no PR
            patched += check()
            seen += 1
        with state.engine.connect() as conn:
            version, changed = changes_since(conn, "nvidia/megatron-lm", MONTH, kept_at)
        assert changed is not None and version > kept_at + seen  # batches and fetches: many versions behind
        assert patched >= 5 and len(changed) > 8
        # A version whose changes are unknown (pruned, say): the month is read whole.
        with state.engine.begin() as conn:
            conn.execute(delete(month_changes).where(month_changes.c.version == kept_at + 2))
        forget_held()
        version, generation = state.month_version(REPO, MONTH)
        assert digests._patched_window(redis, state, s.config, REPO, windows[-1], version, generation, True) is None
        wholes.clear()
        check_window = cached_fold(s, redis, MonthRequest(REPO, windows[-1]))
        assert check_window is not None and len(wholes) == 1
        keep_digest(s, redis, resolve(s, REPO, MONTH, None))  # the next warm
        forget_held()
        assert cached_fold(s, redis, MonthRequest(REPO, windows[-1])) == check_window
        assert len(wholes) == 1  # from the digest


def kept_after(app: Flask, early: list[Any]) -> int:
    """The `early` deliveries through the webhook and the jobs, then Redis emptied and the month's digest
    kept, as the warm job keeps it; the month's version it is as of."""
    from tests.support.app import post, run_jobs
    from tracker.reports.digests import keep_digest

    client = app.test_client()
    for d in early:
        assert post(client, d.body, d.event, d.delivery_id).status_code == 202
    run_jobs(app)
    with app.app_context():
        s = services()
        redis = s.require_redis()
        redis.flushdb()
        keep_digest(s, redis, resolve(s, REPO, MONTH, None))
        version: int = s.state.month_version(REPO, MONTH)[0]
    return version


def assert_folds_as_the_database(s: Any, window: Any) -> None:
    """`cached_fold` at `window`, asked with the evidence, then without, is what `build_snapshot` makes of
    what `MonthState.month_inputs` reads (the oracle, read once for both), with the changed paths of the
    head each PR has then."""
    from tracker.reports.digests import cached_fold

    inputs = s.state.month_inputs(REPO, MONTH, window.end)
    oracle = build_snapshot(
        REPO, window, inputs.timelines, inputs.versions, inputs.verdicts, s.config.rules_for(REPO), inputs.unavailable
    )
    numbers = {pr.status.number for pr in oracle.pull_requests}
    paths = {number: files for number, files in inputs.paths.items() if number in numbers}
    for evidence in (True, False):
        folded = cached_fold(s, s.require_redis(), MonthRequest(REPO, window), evidence=evidence)
        assert folded is not None
        if evidence:
            assert folded[:2] == (oracle, paths), window.cutoff
            assert snapshot_json(folded[0]) == snapshot_json(oracle)
        else:
            assert [replace(pr, evidence={}) for pr in oracle.pull_requests] == list(folded[0].pull_requests)
            assert folded[0].stats == oracle.stats and folded[1] == paths


def whole_reads(monkeypatch: Any) -> list[int]:
    """The windows read whole from the database from now on (tracker.store.month_digest.read_window)."""
    reads: list[int] = []
    reading = digests.read_window

    def recorded(*args: Any) -> Any:
        reads.append(args[3].end)
        return reading(*args)

    monkeypatch.setattr(digests, "read_window", recorded)
    return reads


def test_a_process_that_holds_a_window_reads_again_only_the_prs_changed_since_its_last_request(
    app: Flask, github: Any, monkeypatch: Any
) -> None:
    """A web process polled under a stream holds each window it answered (tracker.reports.digests): the next
    request reads again only the PRs changed since the version that window is as of, not all of those
    changed since the last warm, and still folds exactly what the database gives (the oracle), with and
    without the evidence, at two cutoffs. With the month's digest gone from Redis the held windows still
    answer; a new ledger generation (a rebuild) or a process that holds nothing does not use them."""
    import random

    from tests.support.app import post, run_jobs
    from tracker.reports.digests import forget_held, keep_digest

    scenario = megatron_month(MONTH, count=32, seed=7)
    for number, sha, paths in scenario.head_files():
        github.set_files(REPO, number, sha, paths)
    deliveries = [d for story in scenario.stories for d in story.deliveries]
    early, rest = deliveries[: len(deliveries) * 3 // 4], deliveries[len(deliveries) * 3 // 4 :]
    random.Random(8).shuffle(rest)  # late and out of order, new PRs among them
    client = app.test_client()
    kept_at = kept_after(app, early)
    reads: list[int] = []  # the version each read of changes starts after
    reading = digests.read_changed

    def recorded(*args: Any) -> Any:
        reads.append(args[5])
        return reading(*args)

    monkeypatch.setattr(digests, "read_changed", recorded)
    with app.app_context():
        s = services()
        state, redis, timezone = s.state, s.require_redis(), s.config.timezone_for(REPO)
        windows = month_windows(MONTH, timezone)
        asked = (windows[14], windows[-1])  # each with the evidence and without: two requests a window
        requests = 2 * len(asked)

        def answers_as_the_database() -> None:
            for window in asked:
                assert_folds_as_the_database(s, window)

        previous = kept_at
        rounds = 0
        for start in range(0, len(rest), 3):
            for d in rest[start : start + 3]:
                post(client, d.body, d.event, d.delivery_id)
            run_jobs(app)
            version = state.month_version(REPO, MONTH)[0]
            if version == previous:
                continue  # redeliveries only
            reads.clear()
            answers_as_the_database()
            # Each window read again what changed since it was last answered: the digest's version at first,
            # then the version of the request before.
            assert reads == [previous] * requests
            previous = version
            rounds += 1
            if rounds == 3:
                redis.flushdb()  # the digest and every grouping gone: the held windows still answer
        assert rounds >= 5 and previous > kept_at + 5
        # Nothing changed since: nothing is read again, not even the digest in Redis.
        reads.clear()
        fields: list[str] = []
        reading_fields = digests.cutoff_fields
        monkeypatch.setattr(digests, "cutoff_fields", lambda *args: fields.append(args[1]) or reading_fields(*args))
        answers_as_the_database()
        assert reads == [] and fields == []
        monkeypatch.setattr(digests, "cutoff_fields", reading_fields)
        # A process that holds nothing, with no digest in Redis, reads each window whole.
        wholes = whole_reads(monkeypatch)
        forget_held()
        answers_as_the_database()
        assert wholes == [window.end for window in asked for _evidence in (True, False)]
        # A rebuild (a new generation) is not answered from what was held before it.
        keep_digest(s, redis, resolve(s, REPO, MONTH, None))
        answers_as_the_database()
        assert len(wholes) == requests
        state.new_generation()
        answers_as_the_database()
        assert len(wholes) == 2 * requests


def test_a_window_read_while_a_batch_commits_is_the_month_as_of_the_version_it_began_at(
    app: Flask, github: Any, monkeypatch: Any
) -> None:
    """A window, and the PRs changed since a version, are read in one snapshot of the database (SQLite's
    read transaction; REPEATABLE READ on PostgreSQL, where each statement of a default transaction sees every
    commit before it): a batch committed in the middle of a read is not half in it. The read answers the
    month as of the version it began at, the same as a read before the batch; the next read has the batch."""
    import json

    from tests.support.app import post, run_jobs
    from tracker.store import month_digest
    from tracker.store.month_digest import read_changed, read_window

    scenario = megatron_month(MONTH, count=16, seed=9)
    for number, sha, paths in scenario.head_files():
        github.set_files(REPO, number, sha, paths)
    month = "2026-04"  # where most of these PRs were opened
    opened = [s for s in scenario.stories if json.loads(s.deliveries[0].body)["pull_request"]["created_at"] < "2026-05"]
    last = opened[-3:]  # PRs of their own, opened in `month`: each batch moves it on
    client = app.test_client()

    def deliver(deliveries: list[Any]) -> None:
        for d in deliveries:
            assert post(client, d.body, d.event, d.delivery_id).status_code == 202
        run_jobs(app)

    deliver([d for story in scenario.stories if story not in last for d in story.deliveries])
    reading = month_digest._read
    with app.app_context():
        s = services()
        since = s.state.month_version(REPO, month)[0]
        deliver(last[0].deliveries)
        window = month_windows(month, s.config.timezone_for(REPO))[-1]
        rules = s.config.rules_for(REPO)
        reads = (
            lambda: read_window(s.state.engine, REPO, month, window, rules),
            lambda: read_changed(s.state.engine, REPO, month, window, rules, since),
        )
        for read, story in zip(reads, last[1:], strict=True):
            before = read()
            assert before is not None and before[0] == s.state.month_version(REPO, month)[0]

            def read_during_a_batch(*args: Any, batch: list[Any] = story.deliveries) -> Any:
                deliver(batch)  # committed after the read began, before its facts and versions are read
                return reading(*args)

            monkeypatch.setattr(month_digest, "_read", read_during_a_batch)
            during = read()
            monkeypatch.setattr(month_digest, "_read", reading)
            assert s.state.month_version(REPO, month)[0] > before[0]  # the batch moved the month on
            assert during == before
            after = read()
            assert after is not None and after[0] > before[0] and after != before


def test_a_month_of_the_longest_bodies_keeps_a_digest_the_size_of_its_prs_and_the_same_reports(
    app: Flask, github: Any
) -> None:
    """Issue 31: PR bodies are written by anyone who opens a PR, up to GitHub's 65,536 characters (a backfill
    brings longer ones). 200 PRs with such bodies (HTML comments, cues citing other PRs, some edited to
    another body) and 2 with 1 MB ones, through the webhook and the worker's jobs: the month's digest in
    Redis grows with its PRs, not with their bodies (each body kept once, long ones as their excerpt), and
    every document read from it, the narrator's input included, is the one the database gives."""
    from datetime import UTC, datetime, timedelta

    from bench.fixtures.factory import delivery, pr_payload
    from tests.support.app import post, run_jobs
    from tracker.core import clusters
    from tracker.narration import schema as narration
    from tracker.reports.cache import rendered_bytes
    from tracker.reports.digests import digest_key, forget_held, keep_digest
    from tracker.reports.loading import report_for, resolve
    from tracker.store.month_digest import KEPT_BODY

    count, longest = 200, 65_536
    words = ["tensor", "parallel", "router", "kernel", "checkpoint", "loader", "pipeline", "expert", "fused"]

    def body(number: int, size: int, edit: int = 0) -> str:
        text = (
            "<!-- Describe your change. Say which issue it fixes. -->\n"
            f"## What\nEdit {edit} of PR {number}: " + " ".join(words[(number + i) % len(words)] for i in range(40))
        )
        text += f"\n\nThis is the cherry-pick of #{number + 1} onto dev.\n" + "```\nlog line " * (size // 9)
        return (text[: size - 40] + f"\ncounterpart of #{number - 1}\n").ljust(size, "x")[:size]

    start = datetime(2026, 5, 1, 2, tzinfo=UTC)
    client = app.test_client()
    payloads = []
    for index in range(count + 2):
        number = 7000 + index
        size = longest if index < count else 1024 * 1024
        opened = start + timedelta(hours=3 * index + 1)
        fields: dict[str, Any] = {
            "repo": REPO,
            "title": f"Speed up the {words[index % len(words)]} {index % 17}",
            "base": "main" if index % 3 else "dev",
            "body": body(number, size),
        }
        payloads.append(pr_payload("opened", number, created_at=opened, **fields))
        sha = payloads[-1]["pull_request"]["head"]["sha"]
        github.set_files(REPO, number, sha, [f"megatron/core/{words[index % len(words)]}/module_{index % 7}.py"])
        if index % 10 == 0:  # edited: another body of the longest size, from then on
            fields["body"] = body(number, size, edit=1)
            edited = opened + timedelta(days=2)
            payloads.append(pr_payload("edited", number, created_at=opened, updated_at=edited, **fields))
        if index % 2 == 0:
            merged = opened + timedelta(days=4)
            payloads.append(
                pr_payload("closed", number, created_at=opened, updated_at=merged, merged_at=merged, **fields)
            )
    for payload in payloads:
        d = delivery("pull_request", payload)
        assert post(client, d.body, d.event, d.delivery_id).status_code == 202
    run_jobs(app)
    with app.app_context():
        s = services()
        redis = s.require_redis()
        digest = keep_digest(s, redis, resolve(s, REPO, MONTH, None))
        edited = len(range(0, count + 2, 10))
        assert len(digest.bodies) == count + 2 + edited  # each body once: not once per cutoff
        assert len(digest.pull_requests) == count + 2
        key = digest_key(s, resolve(s, REPO, MONTH, None))
        fields_of = {field.decode(): redis.hstrlen(key, field) for field in redis.hkeys(key)}
        # The month's tables: each body at most a few kilobytes, whatever its size.
        assert fields_of[PATHS] < len(digest.bodies) * 2 * KEPT_BODY
        # A cutoff's slice names each body by its position: a few hundred bytes a PR.
        assert max(size for field, size in fields_of.items() if field.isdigit()) < (count + 2) * 600
        # In all, in Redis: within a few megabytes for these 202 PRs (before: one copy of each body per
        # cutoff its PR is in, about 250 MB), about 11 kB a PR.
        used = redis.memory_usage(key, samples=0)
        assert used is not None and used < (count + 2) * 16 * 1024, used

        # What the reports read from it is what the database gives, at the month's end and mid-month.
        for cutoff in ("2026-05-31", "2026-05-15"):
            request = resolve(s, REPO, MONTH, cutoff)
            for fmt, detail in (("json", "full"), ("md", "full")):
                for rendered in redis.scan_iter(match="tracker:render:*"):
                    redis.delete(rendered)
                forget_held()
                clusters.forget()
                from_digest = rendered_bytes(s, request, Document(fmt, "en", detail), cache=redis)
                clusters.forget()
                from_database = rendered_bytes(s, request, Document(fmt, "en", detail), cache=None)
                assert from_digest == from_database, (cutoff, fmt)
            forget_held()
            kept = report_for(s, request, prose=False, digest=digest)
            read = report_for(s, request, prose=False)
            sections = [section.id for section in read.sections if section.changes]
            assert sections
            for section in sections:
                assert narration.section_input(kept, section) == narration.section_input(read, section)
            bodies = [pr.version.body for pr in kept.snapshot.pull_requests if pr.version]
            assert max(map(len, bodies)) < 2 * KEPT_BODY  # excerpts, not the bodies


def test_a_long_bodys_excerpt_gives_the_report_and_the_narrator_what_the_body_gives() -> None:
    """`body_excerpt`: a body up to KEPT_BODY characters is kept as it is; a longer one, hostile ones included
    (comments never closed, `<!--` hidden by invisible characters, cues the narrator's cleaning would join to
    a number, block markers, thousands of cues), is cut to a few kilobytes that cite the same PRs and give the
    narrator the same input, and the same documents."""
    import random

    from tests.core.test_report import MERGED, OPEN, PR, report
    from tracker.narration import schema as narration
    from tracker.reports.render import render_bytes
    from tracker.store.month_digest import KEPT_BODY, body_excerpt

    ordinary = "## What\nFix the router. Cherry-pick of #12.\n<!-- a template's note -->\n" * 20
    assert len(ordinary) <= KEPT_BODY and body_excerpt(ordinary) == ordinary
    pieces = ["fix ", "cp", " cherry-pick of ", "#12", "#7", "/pull/9", "/PULL/8", "<!--", "-->", "\u200b", "\n"]
    pieces += ["  ", "<<<", ">>>", "PR DATA", "x" * 50, "port ", "#", "1234", "\r\n", "<!", "--", "\xa0", "\x00"]
    rng = random.Random(31)
    bodies = [
        "word " * 20_000,
        "<!--" * 16_384,
        "<" * 65_536,
        "PR DATA " * 8_192 + " \u200b" * 10_000,
        "cherry-pick of #1 and " * 20_000 + "cp " * 50_000 + "mirror " + "x" * 100_000 + " #1",
        "<!-- " + "a" * 70_000 + " --> cp #5 " + "b" * 3_000,  # a cue after a long comment
        "c\u200bp #5 " * 3_000,  # a cue only once the invisible character is taken out
        "cp <!-- " + "z" * 100 + " --> #6 " + "y " * 3_000,  # a cue only once the comment is taken out
        "<!\u200b-- not a comment until cleaned " * 500,
        "#1#2#3" * 5_000,
        "cp #" + "7" * 3_000 + " " + "w " * 2_000,
        "".join(f"cp #{number} " for number in range(1, 3_000)),  # cites more than MAX_CITED: see below
    ]
    bodies += ["".join(rng.choice(pieces) for _ in range(rng.randrange(600, 3_000))) for _ in range(60)]
    for body in bodies:
        excerpt = body_excerpt(body)
        assert len(body) <= KEPT_BODY or len(excerpt) < 5 * KEPT_BODY
        if len(body_references(body)) > 128:  # MAX_CITED: the first ones only
            assert body_references(excerpt) < body_references(body)
            continue
        assert body_references(excerpt) == body_references(body), body[:60]
        prs = [
            PR(1, MERGED, "Fix the router", body=body),
            PR(2, MERGED, "Fix the router", base="dev", body=body[:3_000] + "."),  # the same text, cut
            PR(3, OPEN, "Add a loader", body=body[::-1]),
            PR(12, MERGED, "Fix the router load", body="cp #1"),
        ]
        whole = report(prs)
        cut = report([replace(pr, body=body_excerpt(pr.body)) for pr in prs])
        for section in whole.sections:
            if section.changes:
                assert narration.section_input(cut, section.id) == narration.section_input(whole, section.id)
        for fmt in ("md", "json"):
            assert render_bytes(cut, fmt, "en") == render_bytes(whole, fmt, "en")


def test_a_month_of_the_longest_bodies_keeps_its_digest_within_issue_31s_budget_a_pr(app: Flask, github: Any) -> None:
    """Issue 31: "Redis memory for a month of 1,400 PRs with maximum-size bodies stays within a few MB per
    month", taken as 3 MB for the 1,400 PRs: about 2.2 kB a PR. 200 real Megatron-LM PRs (their titles, base
    branches and changed paths) opened across the month, each with a body of GitHub's 65,536 characters of
    prose (words drawn at random from a vocabulary of a thousand, so that it compresses no better than
    writing does), one in ten edited to another, half merged: the month's digest key stays within that budget
    a PR, though each PR is in every cutoff's slice from its opening on (when each slice repeated its
    version, titles and evidence uncompressed: about 15 kB a PR)."""
    import random
    from datetime import UTC, datetime, timedelta

    from bench.fixtures.factory import delivery, pr_payload
    from bench.fixtures.scenario import real_prs
    from tests.support.app import post, run_jobs
    from tracker.reports.digests import digest_key, keep_digest

    count, longest, budget = 200, 65_536, 3 * 1024 * 1024 // 1_400
    rng = random.Random(31)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 10))) for _ in range(1_000)]

    def body(number: int) -> str:
        words = " ".join(rng.choices(vocabulary, k=longest // 6))  # words of 6 characters on average, and spaces
        return (f"Fixes #{number - 1}.\n\n" + words)[:longest]

    start = datetime(2026, 5, 1, 2, tzinfo=UTC)
    client = app.test_client()
    payloads = []
    for index, pr in enumerate(real_prs()[:count]):
        number = pr["pr_number"]
        opened = start + timedelta(hours=3.5 * index)
        fields: dict[str, Any] = {"repo": REPO, "title": pr["title"], "base": pr["branch"], "body": body(number)}
        payloads.append(pr_payload("opened", number, created_at=opened, **fields))
        sha = payloads[-1]["pull_request"]["head"]["sha"]
        github.set_files(REPO, number, sha, [file["path"] for file in pr["files"]] or ["README.md"])
        if index % 10 == 0:
            fields["body"] = body(number)
            edited = opened + timedelta(days=1)
            payloads.append(pr_payload("edited", number, created_at=opened, updated_at=edited, **fields))
        if index % 2 == 0:
            merged = opened + timedelta(days=2)
            payloads.append(
                pr_payload("closed", number, created_at=opened, updated_at=merged, merged_at=merged, **fields)
            )
    for payload in payloads:
        d = delivery("pull_request", payload)
        assert post(client, d.body, d.event, d.delivery_id).status_code == 202
    run_jobs(app)
    with app.app_context():
        s = services()
        redis = s.require_redis()
        digest = keep_digest(s, redis, resolve(s, REPO, MONTH, None))
        assert len(digest.pull_requests) == count and len(digest.bodies) > count  # the edited PRs' two
        key = digest_key(s, resolve(s, REPO, MONTH, None))
        used = redis.memory_usage(key, samples=0)
        assert used is not None and used < count * budget, (used, used / count)
