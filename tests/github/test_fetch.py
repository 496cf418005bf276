"""From deliveries to classified PRs: files fetched once per head through the fake GitHub."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from bench.fixtures.paths import require_shared
from tests.support.clock import at

require_shared()  # the fake GitHub (imported below) reads GitHub's example answers from ../shared as it loads

from bench.fixtures.factory import PullRequestStory  # noqa: E402
from bench.fixtures.fake_github import FakeGitHub, Scripted  # noqa: E402
from tests.support.app import BurstWorker, post, release_due_jobs, run_jobs  # noqa: E402
from tracker.config import load_config  # noqa: E402
from tracker.store.rebuild import rebuild  # noqa: E402
from tracker.web.context import services  # noqa: E402
from workers import runtime  # noqa: E402

REPO = "NVIDIA/Megatron-LM"
MONTH = f"/api/v1/repos/{REPO}/months/2026-09"


def deliver(client: FlaskClient, story: PullRequestStory, *, show_to_github: bool = True) -> None:
    for d in story.deliveries:
        if show_to_github:
            assert post(client, d.body, d.event, d.delivery_id).status_code == 202
        else:
            from tests.support.app import signed_headers

            client.post("/webhook", data=d.body, headers=signed_headers(d.body, d.event, d.delivery_id))


def head_of(story: PullRequestStory, index: int) -> str:
    return str(json.loads(story.deliveries[index].body)["pull_request"]["head"]["sha"])


def snapshot(client: FlaskClient, cutoff: str | None = None) -> dict[str, Any]:
    url = MONTH + (f"?cutoff={cutoff}" if cutoff else "")
    answer = client.get(url)
    assert answer.status_code == 200, answer.json
    return answer.json  # type: ignore[no-any-return]


def by_number(document: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {pr["number"]: pr for pr in document["pull_requests"]}


def test_a_test_only_pr_is_excluded_with_evidence(app: Flask, client: FlaskClient, github: FakeGitHub) -> None:
    story = PullRequestStory(1, at("2026-09-02T01:00:00Z")).opened()
    github.set_files(REPO, 1, head_of(story, 0), ["tests/unit_tests/test_a.py", "./tests/unit_tests/test_b.py"])
    code = PullRequestStory(2, at("2026-09-03T01:00:00Z")).opened()
    deliver(client, story)
    deliver(client, code)
    run_jobs(app)
    document = snapshot(client)
    assert document["stats"] == {"opened": 1, "merged": 0, "closed_unmerged": 0, "active_at_cutoff": 1}
    assert document["excluded"] == {"test_only": 1, "ci_only": 0, "test_ci_only": 0, "format_only": 0}
    assert document["pending_classification"] == 0
    pr = by_number(document)[1]
    assert pr["category"] == "test_only"
    assert pr["evidence"]["rule"] == "all_files_test"
    assert pr["evidence"]["head_sha"] == head_of(story, 0)
    assert pr["evidence"]["matching_files"] == 2
    assert pr["evidence"]["examples"] == ["./tests/unit_tests/test_b.py", "tests/unit_tests/test_a.py"]
    assert pr["counted"] == {"opened": False, "merged": False, "closed_unmerged": False, "active_at_cutoff": False}
    assert by_number(document)[2]["category"] == "substantive"


def test_pending_until_the_files_arrive(app: Flask, client: FlaskClient, github: FakeGitHub) -> None:
    deliver(client, PullRequestStory(1, at("2026-09-02T01:00:00Z")).opened())
    with app.app_context():
        s = services()
        BurstWorker([s.delivery_queue], connection=s.redis).work(burst=True)  # deliveries only, not GitHub
    document = snapshot(client)
    assert document["pending_classification"] == 1
    assert by_number(document)[1]["category"] == "pending"
    assert document["stats"]["opened"] == 0  # never silently counted
    assert client.get("/api/v1/status").json["github"]["waiting_jobs"] == 1
    run_jobs(app)
    document = snapshot(client)
    assert document["pending_classification"] == 0
    assert document["stats"]["opened"] == 1


def test_a_head_s_files_ask_for_the_month_s_report_to_be_warmed_again(
    app: Flask, client: FlaskClient, github: FakeGitHub
) -> None:
    """A head's verdict changes the month's report as a delivery does: the fetch that stores it asks for the
    month's warm (tracker.reports.warm), so that a month whose last change was a classification is warmed too."""
    from tracker.reports import warm

    deliver(client, PullRequestStory(1, at("2026-09-02T01:00:00Z")).opened())
    with app.app_context():
        s = services()
        redis = s.require_redis()
        BurstWorker([s.delivery_queue], connection=s.redis).work(burst=True)  # deliveries only, not GitHub
        asked = warm.waiting_key(REPO, "2026-09")
        assert redis.exists(asked)  # by the deliveries' batch
        redis.delete(asked, warm.changed_key(REPO, "2026-09"))  # as once that warm has started
        BurstWorker([s.github_queue], connection=s.redis).work(burst=True)  # the head's files
        assert redis.exists(asked) and redis.exists(warm.changed_key(REPO, "2026-09"))
        assert not redis.exists(warm.waiting_key(REPO, "2026-08"))  # a month the PR is not in


def test_a_later_push_turns_test_only_into_substantive(app: Flask, client: FlaskClient, github: FakeGitHub) -> None:
    story = PullRequestStory(5, at("2026-09-02T01:00:00Z")).opened().pushed(at("2026-09-10T01:00:00Z"))
    github.set_files(REPO, 5, head_of(story, 0), ["tests/unit_tests/test_x.py"])
    github.set_files(REPO, 5, head_of(story, 1), ["tests/unit_tests/test_x.py", "megatron/core/x.py"])
    deliver(client, story)
    run_jobs(app)
    before = by_number(snapshot(client, "2026-09-05"))[5]
    after = by_number(snapshot(client, "2026-09-12"))[5]
    assert (before["category"], before["head_sha"]) == ("test_only", head_of(story, 0))
    assert (after["category"], after["head_sha"]) == ("substantive", head_of(story, 1))
    assert snapshot(client, "2026-09-05")["excluded"]["test_only"] == 1
    assert snapshot(client, "2026-09-12")["stats"]["active_at_cutoff"] == 1


def test_files_are_stored_under_the_head_they_belong_to(app: Flask, client: FlaskClient, github: FakeGitHub) -> None:
    """The job for the first head runs after a second push: the files endpoint answers for the new
    head, so the first head's files must come from elsewhere (the compare endpoint)."""
    story = PullRequestStory(6, at("2026-09-02T01:00:00Z")).opened().pushed(at("2026-09-10T01:00:00Z"))
    first, second = head_of(story, 0), head_of(story, 1)
    github.set_files(REPO, 6, first, ["tests/unit_tests/test_y.py"])
    deliver(client, PullRequestStory(6, story.created_at, deliveries=story.deliveries[:1]))
    github.set_files(REPO, 6, second, ["megatron/core/y.py"])  # the push happens before any job runs
    run_jobs(app)
    assert github.count(r"/compare/") == 1
    deliver(client, PullRequestStory(6, story.created_at, deliveries=story.deliveries[1:]))
    run_jobs(app)
    assert github.count(r"/pulls/6/files") == 1  # the second head was stored from the first listing
    assert by_number(snapshot(client, "2026-09-05"))[6]["category"] == "test_only"
    assert by_number(snapshot(client, "2026-09-12"))[6]["category"] == "substantive"


def test_a_head_the_ledger_shows_passed_by_is_compared_without_asking_the_listing(
    app: Flask, client: FlaskClient, github: FakeGitHub
) -> None:
    """Three pushes arrive before any fetch runs: GitHub's files listing answers for the last head only,
    so the two earlier heads are asked of the compare endpoint at once (one request each, not a listing
    that cannot be theirs and then a comparison), and the last head of the files listing."""
    story = (
        PullRequestStory(9, at("2026-09-02T01:00:00Z"))
        .opened()
        .pushed(at("2026-09-05T01:00:00Z"))
        .pushed(at("2026-09-10T01:00:00Z"))
    )
    heads = [head_of(story, index) for index in range(3)]
    github.set_files(REPO, 9, heads[0], ["tests/unit_tests/test_a.py"])
    github.set_files(REPO, 9, heads[1], ["tests/unit_tests/test_a.py", "ci/run.sh"])
    github.set_files(REPO, 9, heads[2], ["megatron/core/a.py"])
    deliver(client, story)
    run_jobs(app)
    assert github.count(r"/compare/") == 2
    assert github.count(r"/pulls/9/files") == 1
    assert len(github.requests) == 3, github.requests
    assert by_number(snapshot(client, "2026-09-03"))[9]["category"] == "test_only"
    assert by_number(snapshot(client, "2026-09-07"))[9]["category"] == "test_ci_only"
    assert by_number(snapshot(client, "2026-09-12"))[9]["category"] == "substantive"
    # The job tallied its three answers and wrote them to the shared quota once, at its end.
    assert client.get("/api/v1/status").json["github"]["requests"] == 3


def test_one_files_request_per_new_head_and_none_for_labels_or_edits(
    app: Flask, client: FlaskClient, github: FakeGitHub
) -> None:
    story = (
        PullRequestStory(7, at("2026-09-02T01:00:00Z"))
        .opened()
        .labeled(at("2026-09-02T02:00:00Z"), "moe")
        .retitled(at("2026-09-02T03:00:00Z"), "Better title")
        .pushed(at("2026-09-03T01:00:00Z"))
        .labeled(at("2026-09-03T02:00:00Z"), "moe", "bug")
        .merged(at("2026-09-04T01:00:00Z"))
    )
    github.set_files(REPO, 7, head_of(story, 0), [f"megatron/core/m{i}.py" for i in range(150)])
    deliver(client, PullRequestStory(7, story.created_at, deliveries=story.deliveries[:3]))
    run_jobs(app)
    github.set_files(REPO, 7, head_of(story, 3), [f"megatron/core/m{i}.py" for i in range(151)])
    deliver(client, PullRequestStory(7, story.created_at, deliveries=story.deliveries[3:]))
    run_jobs(app)
    # two heads: 150 files (2 pages) + 151 files (2 pages); the labels, the edit and the merge of a
    # known head cost nothing
    assert len(github.requests) == 4, github.requests
    assert by_number(snapshot(client))[7]["title"] == "Better title"


def test_pagination_over_many_pages_and_the_3000_file_cap(app: Flask, client: FlaskClient, github: FakeGitHub) -> None:
    story = PullRequestStory(8, at("2026-09-02T01:00:00Z")).opened()
    github.set_files(REPO, 8, head_of(story, 0), [f"tests/unit_tests/t{i}.py" for i in range(3100)])
    deliver(client, story)
    run_jobs(app)
    assert github.count(r"/pulls/8/files") == 30  # 3,000 listed, 100 a page
    pr = by_number(snapshot(client))[8]
    assert pr["category"] == "test_only"
    assert pr["evidence"]["files_truncated"] is True
    assert pr["evidence"]["files"] == 3000


def test_rate_limits_and_outages_delay_but_never_lose_or_double_count(
    app: Flask, client: FlaskClient, github: FakeGitHub
) -> None:
    stories = [PullRequestStory(n, at(f"2026-09-0{n}T01:00:00Z")).opened() for n in range(1, 5)]
    github.set_files(REPO, 1, head_of(stories[0], 0), [f"tests/t{i}.py" for i in range(120)])  # two pages
    reset = int(time.time()) + 1
    github.script(
        r"/pulls/\d+/files",
        Scripted(502),
        Scripted(502),
        Scripted(502),  # three 5xx: the job re-schedules itself with backoff
        Scripted(0, delay=1.5),  # a timeout
        Scripted(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)}, {"message": "rate limit"}),
    )
    github.script(r"/pulls/\d+/files", Scripted(429, {"retry-after": "1"}, {"message": "secondary rate limit"}))
    runtime.current().github_timeout = 0.5
    runtime.current().github_backoff = 0.5
    for story in stories:
        deliver(client, story)
    run_jobs(app)
    deadline = time.monotonic() + 120
    while snapshot(client)["pending_classification"]:
        assert time.monotonic() < deadline, (snapshot(client), github.requests)
        time.sleep(0.5)
        release_due_jobs(app)
        run_jobs(app)
    document = snapshot(client)
    assert document["stats"]["opened"] == 3
    assert document["excluded"]["test_only"] == 1
    status = client.get("/api/v1/status").json
    assert status["deliveries"] == {"received": 4, "processed": 4, "failed": 0, "pending": 0}
    assert status["github"]["waiting_jobs"] == 0
    assert status["github"]["heads_without_files"] == 0
    with app.app_context():
        from sqlalchemy import func, select

        from tracker.store.schema import head_files, heads

        with services().ledger.engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(heads)).scalar_one() == 4
            assert conn.execute(select(func.count()).select_from(head_files)).scalar_one() == 123


def test_status_shows_the_quota(app: Flask, client: FlaskClient, github: FakeGitHub) -> None:
    deliver(client, PullRequestStory(1, at("2026-09-02T01:00:00Z")).opened())
    run_jobs(app)
    quota = client.get("/api/v1/status").json["github"]
    assert quota["limit"] == 5000
    assert quota["remaining"] == github.remaining
    assert quota["reset"].endswith("Z")
    assert quota["requests"] == 1


def test_a_rate_limit_holds_every_fetch_back(app: Flask, client: FlaskClient, github: FakeGitHub) -> None:
    reset = int(time.time()) + 3600
    github.script(r"/files", Scripted(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)}))
    for n in (1, 2, 3):
        deliver(client, PullRequestStory(n, at(f"2026-09-0{n}T01:00:00Z")).opened())
    run_jobs(app)
    assert github.count(r"/files") == 1  # the other two waited without asking
    status = client.get("/api/v1/status").json["github"]
    assert status["waiting_jobs"] == 3
    assert status["blocked_until"] is not None
    with app.app_context():
        from workers.sweep import sweep

        sweep(services(), grace_seconds=0)
    assert client.get("/api/v1/status").json["github"]["waiting_jobs"] == 3  # the sweep adds none
    assert snapshot(client)["pending_classification"] == 3


def test_a_fetch_held_back_again_keeps_its_next_run(app: Flask, client: FlaskClient, github: FakeGitHub) -> None:
    """A fetch re-scheduled behind a rate limit that finds another one when it runs schedules its next run
    under an id of its own: under its own id, the next run would be saved over as finished when this one
    ends, and expire with its result ten minutes later, long before an hour's rate limit is over."""
    from rq.job import JobStatus
    from rq.registry import ScheduledJobRegistry

    deliver(client, PullRequestStory(1, at("2026-09-02T01:00:00Z")).opened())
    blocked = time.time() + 3600
    with app.app_context():
        services().quota().block_until(blocked)
    run_jobs(app)  # the drain, then the batch: the head waits for the rate limit in a job of its own
    release_due_jobs(app, at=blocked + 1)
    with app.app_context():
        services().quota().block_until(blocked + 3600)  # another rate limit meanwhile
    run_jobs(app)  # the head's own job runs now, and is held back again
    with app.app_context():
        s = services()
        registry = ScheduledJobRegistry(queue=s.github_queue)  # type: ignore[no-untyped-call]
        [waiting] = [s.github_queue.fetch_job(job_id) for job_id in registry.get_job_ids()]
        assert waiting is not None and waiting.get_status() == JobStatus.SCHEDULED
        assert s.redis.ttl(waiting.key) == -1  # kept until it runs
        assert list(waiting.args)[-2:] == [2, 0]  # its third run, after no outage
    assert github.count(r"/files") == 0
    release_due_jobs(app, at=blocked + 3601)
    with app.app_context():
        assert services().github_queue.job_ids == [waiting.id]


def test_the_sweep_asks_again_for_files_lost_with_redis(app: Flask, client: FlaskClient, github: FakeGitHub) -> None:
    deliver(client, PullRequestStory(1, at("2026-09-02T01:00:00Z")).opened())
    with app.app_context():
        from workers.sweep import sweep

        s = services()
        BurstWorker([s.delivery_queue], connection=s.redis).work(burst=True)
        s.redis.flushdb()  # the fetch job is gone
        sweep(s, grace_seconds=0)
    run_jobs(app)
    assert snapshot(client)["pending_classification"] == 0


def test_a_fetch_marker_from_before_a_redis_restart_does_not_hold_the_sweep_back(
    app: Flask, client: FlaskClient, github: FakeGitHub
) -> None:
    """Redis restarted from its append-only file: the marker of a fetch came back, the job a worker had
    taken did not. The sweep asks again at once instead of 15 minutes later; a marker of this run is a
    fetch on its way, and the sweep adds none."""

    from tracker.queue import fetch_marker, redis_run
    from workers.sweep import sweep

    story = PullRequestStory(1, at("2026-09-02T01:00:00Z")).opened()
    deliver(client, story)
    with app.app_context():
        s = services()
        BurstWorker([s.delivery_queue], connection=s.redis).work(burst=True)  # the drain: a fetch is queued
        marker = fetch_marker(REPO.lower(), 1, head_of(story, 0))
        assert s.redis.get(marker) == redis_run(s.redis).encode()
        s.github_queue.empty()  # the job was taken by a worker that died with Redis
        sweep(s, grace_seconds=0)
        assert s.github_queue.count == 0  # this run's marker: a fetch is on its way
        s.redis.set(marker, "a-run-before-the-restart", ex=900)
        sweep(s, grace_seconds=0)
        assert s.github_queue.count == 1
        assert s.redis.get(marker) == redis_run(s.redis).encode()
    run_jobs(app)
    assert snapshot(client)["pending_classification"] == 0


def test_rebuild_reclassifies_under_a_new_config_without_calling_github(
    app: Flask, client: FlaskClient, github: FakeGitHub, tmp_path: Path
) -> None:
    story = PullRequestStory(9, at("2026-09-02T01:00:00Z")).opened()
    github.set_files(REPO, 9, head_of(story, 0), ["docs/guide.md", "docs/api.md"])
    deliver(client, story)
    run_jobs(app)
    assert by_number(snapshot(client))[9]["category"] == "substantive"
    requests = len(github.requests)
    config_file = tmp_path / "tracker.yaml"
    config_file.write_text(f"repositories:\n  {REPO}:\n    classification:\n      test_paths: ['tests/', 'docs/']\n")
    with app.app_context():
        s = services()
        settings = s.settings.model_copy(update={"config_path": config_file})
        new_config = load_config(settings)
        rebuild(s.ledger, s.state, new_config)
        object.__setattr__(s, "config", new_config)
    pr = by_number(snapshot(client))[9]
    assert pr["category"] == "test_only"
    assert pr["evidence"]["examples"] == ["docs/api.md", "docs/guide.md"]
    assert len(github.requests) == requests


def test_a_format_only_pr_needs_the_title_signal(app: Flask, client: FlaskClient, github: FakeGitHub) -> None:
    whitespace = {"filename": "megatron/core/a.py", "patch": "@@ -1,2 +1,2 @@\n-x=1\n+x = 1\n y"}
    titled = PullRequestStory(1, at("2026-09-02T01:00:00Z"), title="Auto-format megatron/core").opened()
    plain = PullRequestStory(2, at("2026-09-02T02:00:00Z"), title="Tidy megatron/core").opened()
    github.set_files(REPO, 1, head_of(titled, 0), [whitespace])
    github.set_files(REPO, 2, head_of(plain, 0), [whitespace])
    deliver(client, titled)
    deliver(client, plain)
    run_jobs(app)
    document = snapshot(client)
    assert by_number(document)[1]["category"] == "format_only"
    assert by_number(document)[1]["evidence"]["signal"] == "title"
    assert by_number(document)[2]["category"] == "substantive"
    assert document["excluded"]["format_only"] == 1


@pytest.mark.parametrize("status", [404, 422])
def test_a_head_github_no_longer_has_stays_pending_without_retrying(
    app: Flask, client: FlaskClient, github: FakeGitHub, status: int
) -> None:
    github.script(r"/files", Scripted(status, {}, {"message": "Not Found"}))
    deliver(client, PullRequestStory(1, at("2026-09-02T01:00:00Z")).opened())
    run_jobs(app)
    document = snapshot(client)
    assert document["pending_classification"] == 1
    assert by_number(document)[1]["evidence"]["rule"] == "files_unavailable"
    assert client.get("/api/v1/status").json["github"]["heads_without_files"] == 0
    assert client.get("/api/v1/status").json["github"]["waiting_jobs"] == 0


def test_a_head_that_fails_in_a_batch_does_not_stop_the_others(
    app: Flask, client: FlaskClient, github: FakeGitHub
) -> None:
    github.script(r"/pulls/2/files", Scripted(401, body={"message": "Bad credentials"}))
    for n in (1, 2, 3):
        deliver(client, PullRequestStory(n, at(f"2026-09-0{n}T01:00:00Z")).opened())
    run_jobs(app)  # one drain, then one job for the three heads
    with app.app_context():
        from rq.registry import FailedJobRegistry, FinishedJobRegistry

        s = services()
        assert FinishedJobRegistry(queue=s.github_queue).get_job_ids() == []
        [failed] = [s.github_queue.fetch_job(i) for i in FailedJobRegistry(queue=s.github_queue).get_job_ids()]
        assert failed is not None
        assert failed.func_name == "workers.jobs.fetch_heads"
        assert len(failed.args[0]) == 3
        result = failed.latest_result()
        assert result is not None
        assert "1 of 3 heads failed (NVIDIA/Megatron-LM#2 at " in str(result.exc_string)
    assert snapshot(client)["pending_classification"] == 1  # PR 2 waits; 1 and 3 are classified
    assert github.count(r"/pulls/[13]/files") == 2


def test_a_batch_says_what_became_of_its_heads(app: Flask, client: FlaskClient, github: FakeGitHub) -> None:
    for n in (1, 2):
        deliver(client, PullRequestStory(n, at(f"2026-09-0{n}T01:00:00Z")).opened())
    run_jobs(app)
    with app.app_context():
        from rq.registry import FinishedJobRegistry

        s = services()
        [done] = [s.github_queue.fetch_job(i) for i in FinishedJobRegistry(queue=s.github_queue).get_job_ids()]
        assert done is not None and done.func_name == "workers.jobs.fetch_heads"
        assert re.fullmatch(r"2 heads: 2 stored \(\d+ ms of CPU\)", str(done.return_value())), done.return_value()
    assert snapshot(client)["pending_classification"] == 0


def test_a_batch_of_one_repository_opens_one_client(
    app: Flask, client: FlaskClient, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One client (and its connection, a TLS handshake away on github.com) serves every head of the batch.
    from tracker.services import Services

    opened: list[str | None] = []
    original = Services.github

    def counted(self: Services, full_name: str | None = None, **options: Any) -> Any:
        opened.append(full_name)
        return original(self, full_name, **options)

    monkeypatch.setattr(Services, "github", counted)
    for n in (1, 2, 3):
        deliver(client, PullRequestStory(n, at(f"2026-09-0{n}T01:00:00Z")).opened())
    run_jobs(app)  # one drain, then one job for the three heads
    assert snapshot(client)["pending_classification"] == 0
    assert github.count(r"/pulls/\d+/files") == 3
    assert opened == [REPO]


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        # An endless chain of next links: the fetch stops at GitHub's 3,000 files (30 pages of 100).
        (
            [
                Scripted(200, {"Link": '<{url}/repos/NVIDIA/Megatron-LM/pulls/2/files?page=2>; rel="next"'}, [])
                for _ in range(31)
            ],
            "goes on past 30 pages, the page limit",
        ),
        ([Scripted(200, raw=b"<html>502 Bad Gateway</html>")], "is not JSON"),
        ([Scripted(200, body=[{"filename": ["a.py"]}])], "'filename' as a list, not a string"),
    ],
)
def test_a_bad_answer_fails_its_head_and_not_the_others(
    app: Flask, client: FlaskClient, github: FakeGitHub, answers: list[Scripted], message: str
) -> None:
    for answer in answers:
        answer.headers = {k: v.format(url=github.url) for k, v in answer.headers.items()}
    github.script(r"/pulls/2/files", *answers)
    for n in (1, 2, 3):
        deliver(client, PullRequestStory(n, at(f"2026-09-0{n}T01:00:00Z")).opened())
    run_jobs(app)  # one drain, then one job for the three heads: it fails, naming what was wrong
    with app.app_context():
        from rq.registry import FailedJobRegistry

        s = services()
        [failed] = [s.github_queue.fetch_job(i) for i in FailedJobRegistry(queue=s.github_queue).get_job_ids()]
        assert failed is not None and failed.func_name == "workers.jobs.fetch_heads"
        result = failed.latest_result()
        assert result is not None
        assert "1 of 3 heads failed (NVIDIA/Megatron-LM#2 at " in str(result.exc_string)
        assert message in str(result.exc_string)
        assert s.github_queue.count == 0  # failed, not re-scheduled
    assert github.count(r"/pulls/2/files") == len(answers) - (1 if len(answers) > 1 else 0)
    assert snapshot(client)["pending_classification"] == 1  # PR 2 waits; 1 and 3 are classified
