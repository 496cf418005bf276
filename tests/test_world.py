"""The fake GitHub's REST view of a month (bench/fixtures/world.py): pulls, timelines, deletions, hook
deliveries and redeliveries, rate limits."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from bench.fixtures.paths import require_shared
from tests.support.clock import at

require_shared()  # the fake GitHub (imported below) reads GitHub's example answers from ../shared as it loads

from bench.fixtures.factory import PullRequestStory  # noqa: E402
from bench.fixtures.fake_github import FakeGitHub, Scripted  # noqa: E402
from bench.fixtures.scenario import REPO, megatron_month  # noqa: E402
from bench.fixtures.world import publish_world, pull_fields  # noqa: E402
from tracker.web.signature import is_valid  # noqa: E402

HOOK = 4242
SECRET = "world-secret"


def head(story: PullRequestStory, index: int) -> str:
    return str(json.loads(story.deliveries[index].body)["pull_request"]["head"]["sha"])


def follow(http: httpx.Client, url: str, **headers: str) -> Iterator[httpx.Response]:
    """Every page, following `Link: rel="next"`."""
    next_url: str | None = url
    while next_url:
        answer = http.get(next_url, headers=headers)
        assert answer.status_code == 200, answer.text
        yield answer
        next_url = answer.links.get("next", {}).get("url")


def when(event: dict[str, Any]) -> str:
    return str(event.get("created_at") or event["committer"]["date"])


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client() as client:  # one client: a new one per request costs ~20 ms
        yield client


@pytest.fixture
def world(github: FakeGitHub) -> Any:
    scenario = megatron_month()
    publish_world(github, scenario.stories, {(n, sha): paths for n, sha, paths in scenario.head_files()})
    return scenario


def test_pulls_are_listed_by_update_newest_first_across_linked_pages_and_revalidated(
    http: httpx.Client, github: FakeGitHub, world: Any
) -> None:
    first = f"{github.url}/repos/{REPO}/pulls?state=all&sort=updated&direction=desc&per_page=25"
    pages = list(follow(http, first))
    items = [pr for page in pages for pr in page.json()]

    assert len(pages) == -(-len(world.stories) // 25) and all(len(page.json()) <= 25 for page in pages)
    assert sorted(pr["number"] for pr in items) == sorted(s.number for s in world.stories)
    updated = [pr["updated_at"] for pr in items]
    assert updated == sorted(updated, reverse=True)
    assert set(pages[0].links) == {"next", "last"} and set(pages[-1].links) == {"prev", "first"}
    assert "per_page=25" in pages[0].links["next"]["url"] and "sort=updated" in pages[0].links["next"]["url"]
    assert all("merged" not in pr and "mergeable" not in pr for pr in items)  # the list's shape

    remaining = int(pages[0].headers["x-ratelimit-remaining"])
    again = http.get(first, headers={"If-None-Match": pages[0].headers["ETag"]})
    assert again.status_code == 304 and again.content == b""
    assert int(again.headers["x-ratelimit-remaining"]) == remaining - len(pages) + 1 == github.remaining  # free
    assert github.count(r"/pulls\?") == len(pages) + 1


def test_list_defaults_are_githubs(http: httpx.Client, github: FakeGitHub, world: Any) -> None:
    still_open = [s for s in world.stories if pull_fields(s)["state"] == "open"]
    listed = [pr for page in follow(http, f"{github.url}/repos/{REPO}/pulls?per_page=100") for pr in page.json()]
    assert {pr["number"] for pr in listed} == {s.number for s in still_open}  # state=open by default
    created = [pr["created_at"] for pr in listed]
    assert created == sorted(created, reverse=True)  # sort=created, desc by default
    by_update = http.get(f"{github.url}/repos/{REPO}/pulls?state=closed&sort=updated&per_page=100").json()
    updated = [pr["updated_at"] for pr in by_update]
    assert updated == sorted(updated) and all(pr["state"] == "closed" for pr in by_update)  # asc unless created
    assert http.get(f"{github.url}/repos/{REPO}/pulls?state=merged").status_code == 422


def test_a_pull_is_its_final_state_with_merged(http: httpx.Client, github: FakeGitHub, world: Any) -> None:
    for story in world.stories:
        pr = http.get(f"{github.url}/repos/{REPO}/pulls/{story.number}").json()
        last = json.loads(story.deliveries[-1].body)["pull_request"]
        assert pr["number"] == story.number and pr["title"] == last["title"]
        assert pr["head"]["sha"] == last["head"]["sha"] and pr["base"]["ref"] == last["base"]["ref"]
        assert (pr["updated_at"], pr["merged_at"], pr["state"]) == (
            last["updated_at"],
            last["merged_at"],
            last["state"],
        )
        assert pr["merged"] is (last["merged_at"] is not None)
        assert pr["url"] == f"https://api.github.com/repos/{REPO}/pulls/{story.number}"
        assert pr["html_url"] == f"https://github.com/{REPO}/pull/{story.number}"
        assert [label["name"] for label in pr["labels"]] == [label["name"] for label in last["labels"]]
        files = http.get(f"{github.url}/repos/{REPO}/pulls/{story.number}/files?per_page=100").json()
        assert files[0]["blob_url"].split("/")[6] == last["head"]["sha"]  # the files of the current head


def test_a_timeline_tells_the_story(http: httpx.Client, github: FakeGitHub) -> None:
    story = (
        PullRequestStory(4242, at("2026-05-03T01:00:00Z"), title="Fix MoE routing")
        .opened()
        .pushed(at("2026-05-03T05:00:00Z"))
        .labeled(at("2026-05-03T06:00:00Z"), "moe")
        .retitled(at("2026-05-04T01:00:00Z"), "Fix the MoE router")
        .closed(at("2026-05-05T01:00:00Z"))
        .reopened(at("2026-05-06T01:00:00Z"))
        .pushed(at("2026-05-07T01:00:00Z"))
        .merged(at("2026-05-08T01:00:00Z"))
    )
    publish_world(github, [story])

    pages = list(follow(http, f"{github.url}/repos/{REPO}/issues/4242/timeline?per_page=4"))
    events = [event for page in pages for event in page.json()]

    assert len(pages) == 3 and "/repositories/" in pages[0].links["next"]["url"]
    assert [(e["event"], when(e)) for e in events] == [
        ("committed", "2026-05-03T01:00:00Z"),
        ("commented", "2026-05-03T03:00:00Z"),  # noise, between the first two deliveries
        ("committed", "2026-05-03T05:00:00Z"),
        ("labeled", "2026-05-03T06:00:00Z"),
        ("renamed", "2026-05-04T01:00:00Z"),
        ("unlabeled", "2026-05-04T01:00:00Z"),  # the factory's later deliveries carry no labels
        ("closed", "2026-05-05T01:00:00Z"),
        ("reopened", "2026-05-06T01:00:00Z"),
        ("committed", "2026-05-07T01:00:00Z"),
        ("merged", "2026-05-08T01:00:00Z"),
        ("closed", "2026-05-08T01:00:00Z"),
    ]
    commits = [e for e in events if e["event"] == "committed"]
    assert [c["sha"] for c in commits] == [head(story, 0), head(story, 1), head(story, 6)]
    assert [c["parents"][0]["sha"] for c in commits[1:]] == [head(story, 0), head(story, 1)]
    assert all("created_at" not in c and c["author"]["date"] == c["committer"]["date"] for c in commits)
    assert commits[0]["html_url"] == f"https://github.com/{REPO}/commit/{head(story, 0)}"
    renamed = next(e for e in events if e["event"] == "renamed")
    assert renamed["rename"] == {"from": "Fix MoE routing", "to": "Fix the MoE router"}
    assert next(e for e in events if e["event"] == "labeled")["label"]["name"] == "moe"
    pr = http.get(f"{github.url}/repos/{REPO}/pulls/4242").json()
    merged, closed = events[-2:]
    assert merged["commit_id"] == closed["commit_id"] == pr["merge_commit_sha"]
    assert pr["merged"] is True and pr["labels"] == [] and pr["title"] == "Fix the MoE router"
    assert merged["actor"]["login"] == "Codertocat" and merged["actor"]["type"] == "User"
    compared = http.get(f"{github.url}/repos/{REPO}/compare/{'0' * 40}...{head(story, 0)}")
    assert compared.status_code == 200  # every head is known to compare


def test_every_timeline_of_a_month_ends_in_its_pull(http: httpx.Client, github: FakeGitHub, world: Any) -> None:
    for story in world.stories:
        pr = http.get(f"{github.url}/repos/{REPO}/pulls/{story.number}").json()
        events = http.get(f"{github.url}/repos/{REPO}/issues/{story.number}/timeline?per_page=100").json()
        times = [when(e) for e in events]
        assert times == sorted(times) and times[0] == pr["created_at"]
        assert [e["sha"] for e in events if e["event"] == "committed"][-1] == pr["head"]["sha"]
        kinds = [e["event"] for e in events]
        assert ("merged" in kinds) is pr["merged"]
        if pr["merged"]:
            assert kinds[-2:] == ["merged", "closed"] and times[-1] == pr["merged_at"]


def test_a_deleted_pull_answers_404(http: httpx.Client, github: FakeGitHub, world: Any) -> None:
    listing = f"{github.url}/repos/{REPO}/pulls?state=all&per_page=100"
    before = [pr["number"] for pr in http.get(listing).json()]
    gone = before[0]
    github.delete_pull(REPO, gone)

    for path in (f"pulls/{gone}", f"issues/{gone}/timeline", f"pulls/{gone}/files"):
        assert http.get(f"{github.url}/repos/{REPO}/{path}").status_code == 404, path
    assert [pr["number"] for pr in http.get(listing).json()] == before[1:]
    assert http.get(f"{github.url}/repos/{REPO}/issues/999999/timeline").status_code == 404


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[tuple[dict[str, str], bytes]], list[int]]]:
    """A small webhook receiver: what it got, and the statuses it answers with (202 when empty)."""
    received: list[tuple[dict[str, str], bytes]] = []
    statuses: list[int] = []

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        received.append((dict(request.headers), request.get_data()))
        return Response("ok", statuses.pop(0) if statuses else 202)(environ, start_response)

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/webhook", received, statuses
    finally:
        server.shutdown()


def test_hook_deliveries_page_by_cursor_and_redeliver_the_original(
    http: httpx.Client, github: FakeGitHub, receiver: Any
) -> None:
    url, received, statuses = receiver
    scenario = megatron_month(count=10, still_open=2)
    publish_world(github, scenario.stories, hook_id=HOOK)
    sent = {d.delivery_id: d for story in scenario.stories for d in story.deliveries}

    pages = list(follow(http, f"{github.url}/repos/{REPO}/hooks/{HOOK}/deliveries?per_page=7"))
    listed = [item for page in pages for item in page.json()]
    assert len(pages) == -(-len(sent) // 7) and {item["guid"] for item in listed} == set(sent)
    assert [item["delivered_at"] for item in listed] == sorted((i["delivered_at"] for i in listed), reverse=True)
    cursor = parse_qs(urlsplit(pages[0].links["next"]["url"]).query)
    assert cursor["per_page"] == ["7"] and cursor["cursor"][0].startswith("v1_")
    assert all(item["status"] == "OK" and item["redelivery"] is False for item in listed)
    assert set(listed[0]) >= {"id", "guid", "delivered_at", "status_code", "event", "action", "repository_id"}

    victim = scenario.stories[3].deliveries[-1]
    github.set_delivery_status(REPO, HOOK, victim.delivery_id, 502)
    failed = next(item for item in github.deliveries(REPO, HOOK) if item["guid"] == victim.delivery_id)
    assert (failed["status_code"], failed["status"]) == (502, "Invalid HTTP Response: 502")
    detail = http.get(f"{github.url}/repos/{REPO}/hooks/{HOOK}/deliveries/{failed['id']}").json()
    assert detail["request"]["payload"] == json.loads(victim.body)

    github.webhook_target, github.webhook_secret = url, SECRET
    attempt = f"{github.url}/repos/{REPO}/hooks/{HOOK}/deliveries/{failed['id']}/attempts"
    assert http.post(attempt).status_code == 202

    [(headers, body)] = received
    assert body == victim.body
    assert headers["X-Github-Delivery"] == victim.delivery_id and headers["X-Github-Event"] == "pull_request"
    assert headers["X-Github-Hook-Id"] == str(HOOK)
    assert is_valid(SECRET.encode(), body, headers["X-Hub-Signature-256"])
    again = [item for item in github.deliveries(REPO, HOOK) if item["guid"] == victim.delivery_id]
    assert [(i["redelivery"], i["status_code"], i["status"]) for i in again] == [
        (True, 202, "OK"),
        (False, 502, "Invalid HTTP Response: 502"),
    ]
    assert [w.path for w in github.writes] == [urlsplit(attempt).path]

    statuses.append(500)  # the receiver fails the next attempt; then nobody listens
    assert http.post(attempt).status_code == 202
    github.webhook_target = None
    assert http.post(attempt).status_code == 202
    retried = http.get(f"{github.url}/repos/{REPO}/hooks/{HOOK}/deliveries?redelivery=true").json()
    assert {(i["status_code"], i["status"]) for i in retried} == {
        (202, "OK"),
        (500, "Invalid HTTP Response: 500"),
        (0, "failed to connect to host"),
    }
    assert http.get(f"{github.url}/repos/{REPO}/hooks/{HOOK}/deliveries?cursor=v1_1").status_code == 400


def test_a_scripted_rate_limit_on_the_timeline_answers_as_scripted(http: httpx.Client, github: FakeGitHub) -> None:
    story = PullRequestStory(7, at("2026-05-03T01:00:00Z")).opened().pushed(at("2026-05-03T02:00:00Z"))
    publish_world(github, [story])
    reset = int(time.time()) + 1
    github.script(
        r"/issues/\d+/timeline",
        Scripted(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)}, {"message": "API rate limit"}),
        Scripted(429, {"retry-after": "1"}, {"message": "You have exceeded a secondary rate limit"}),
    )
    timeline = f"{github.url}/repos/{REPO}/issues/7/timeline"

    primary = http.get(timeline)
    assert primary.status_code == 403 and primary.headers["x-ratelimit-remaining"] == "0"
    assert primary.headers["x-ratelimit-reset"] == str(reset)
    secondary = http.get(timeline)
    assert secondary.status_code == 429 and secondary.headers["retry-after"] == "1"
    answer = http.get(timeline)
    assert answer.status_code == 200 and [e["event"] for e in answer.json()][-1] == "committed"
    assert github.count(r"/issues/7/timeline") == 3
