"""A group's month finalised, served and published (`tracker/records/groups.py`, the group routes of
`tracker/records/views.py`, `tracker/web/groups.py`, `workers.jobs.due_work`), on SQLite and PostgreSQL, through the
real app, real Redis and a real ledger.

Three repositories' May 2026 through the webhook and the worker's jobs, each head's files from the fake GitHub:
`acme/widgets` and `acme/gadgets` (public) and `acme/secret` (`public: false`); the group `platform` has all three
(and publishes to files), the group `open` the two public ones. Each test starts with no record of any kind.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from pydantic import SecretStr
from sqlalchemy import delete

from bench.fixtures.paths import require_shared

require_shared()  # the fake GitHub (imported below) reads GitHub's example answers from ../shared as it loads

from bench.fixtures.factory import PullRequestStory  # noqa: E402
from bench.fixtures.fake_github import FakeGitHub  # noqa: E402
from tests.support.app import ACTIVE_GITHUB, post, run_jobs, running_app  # noqa: E402
from tracker.core.window import WindowError  # noqa: E402
from tracker.records.finalize import MonthNotEnded, finalize  # noqa: E402
from tracker.records.groups import MembersNotRecorded, due_group_months, finalize_group  # noqa: E402
from tracker.records.publish import as_file, group_file_path  # noqa: E402
from tracker.records.store import DOCUMENTS, GroupRecord  # noqa: E402
from tracker.reports.groups import UnknownGroup, group_bytes, resolve_group  # noqa: E402
from tracker.reports.render import Document  # noqa: E402
from tracker.services import Services  # noqa: E402
from tracker.settings import Settings  # noqa: E402
from tracker.store.schema import group_records, month_records, publications  # noqa: E402
from tracker.web.access import sign_link  # noqa: E402
from tracker.web.context import services  # noqa: E402

MONTH = "2026-05"
PUBLIC = ("acme/widgets", "acme/gadgets")
SECRET = "acme/secret"
ALL = (*PUBLIC, SECRET)
SECRET_TITLE = "Classified: the secret scheduler"
ADMIN = {"Authorization": "Bearer test-admin-token"}
LINK_SECRET = "group-records-link-secret"
FORMATS = [("md", "en"), ("md", "zh-CN"), ("html", "en"), ("html", "zh-CN"), ("json", "en")]
pytestmark = pytest.mark.xdist_group("group-records")


def stories() -> list[tuple[PullRequestStory, list[str]]]:
    """Three PRs of May a repository: two merged, one still open; the secret one's first has a title of its own."""
    made = []
    for index, repo in enumerate(ALL):
        for offset, (title, path) in enumerate(
            [
                ("Faster data loader", "megatron/core/datasets/loader.py"),
                ("Checkpoint resharding", "megatron/core/dist_checkpointing/reshard.py"),
                ("Expert parallel overlap", "megatron/core/transformer/moe/overlap.py"),
            ]
        ):
            opened = datetime(2026, 5, 4 + 7 * offset + index, 2, tzinfo=UTC)
            story = PullRequestStory(
                100 * (index + 1) + offset,
                opened,
                repo=repo,
                title=SECRET_TITLE if repo == SECRET and offset == 0 else title,
            ).opened()
            if offset < 2:
                story.merged(opened + timedelta(days=2))
            made.append((story, [path]))
    return made


@pytest.fixture(scope="module")
def delivered(
    module_settings: Settings, github_server: FakeGitHub, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Flask, FlaskClient, Path]]:
    """The three repositories' May, delivered once for the module; the group `platform` publishes to `Path`."""
    folder = tmp_path_factory.mktemp("group-config")
    published = folder / "published"
    config = folder / "tracker.yaml"
    config.write_text(
        f"""
repositories:
  {SECRET}:
    public: false
groups:
  platform:
    members: [{PUBLIC[0]}, {PUBLIC[1]}, {SECRET}]
    publish:
      directory: {published}
  open: [{PUBLIC[0]}, {PUBLIC[1]}]
""",
        encoding="utf-8",
    )
    settings = module_settings.model_copy(update={"config_path": config, "link_secret": SecretStr(LINK_SECRET)})
    github_server.reset()
    ACTIVE_GITHUB.append(github_server)
    try:
        with running_app(settings) as app:
            client = app.test_client()
            for story, files in stories():
                for delivery in story.deliveries:
                    sha = json.loads(delivery.body)["pull_request"]["head"]["sha"]
                    github_server.set_files(story.repo, story.number, sha, files)
                    assert post(client, delivery.body, delivery.event, delivery.delivery_id).status_code == 202
            run_jobs(app)
            ACTIVE_GITHUB.clear()
            yield app, client, published
    finally:
        ACTIVE_GITHUB.clear()


@pytest.fixture
def served(delivered: tuple[Flask, FlaskClient, Path]) -> Iterator[tuple[Flask, FlaskClient, Services, Path]]:
    """The module's app with no record of any month, repository's or group's, and no publication."""
    app, client, published = delivered
    shutil.rmtree(published, ignore_errors=True)
    with app.app_context():
        s = services()
        with s.records.engine.begin() as conn:
            for table in (group_records, month_records, publications):
                conn.execute(delete(table))
        yield app, client, s, published


def record_members(s: Services, repos: tuple[str, ...] = ALL) -> None:
    for repo in repos:
        record, created = finalize(s, repo, MONTH)
        assert created and record.revision == 1


def get(client: FlaskClient, url: str, status: int = 200, headers: dict[str, str] | None = None, **params: Any) -> Any:
    answer = client.get(url, headers=headers or {}, query_string=params)
    assert answer.status_code == status, answer.get_data(as_text=True)[:2000]
    return answer


def live_document(s: Services, name: str, fmt: str, lang: str) -> bytes:
    """The group as its route merges it at the month's last day for the admin (every member), without a cache."""
    group = resolve_group(s, name, MONTH, None, lambda _repo, _window: True)
    return group_bytes(s, group, Document(fmt, lang), None)


# --- finalising --------------------------------------------------------------------------------------------


def test_a_group_waits_for_its_members_records_then_is_recorded_once(
    served: tuple[Flask, FlaskClient, Services, Path],
) -> None:
    _, _, s, _ = served
    with pytest.raises(MembersNotRecorded) as waiting:
        finalize_group(s, "platform", MONTH)
    assert waiting.value.missing == ALL
    assert "acme/widgets, acme/gadgets, acme/secret have none yet" in str(waiting.value)
    record_members(s, PUBLIC)
    with pytest.raises(MembersNotRecorded) as still:
        finalize_group(s, "PLATFORM", MONTH)  # a group's name in any case
    assert still.value.missing == (SECRET,)
    assert s.records.all_group("platform", MONTH) == []  # refused: nothing stored
    record_members(s, (SECRET,))
    record, created = finalize_group(s, "PLATFORM", MONTH, trigger="api")
    assert created and (record.name, record.month, record.revision, record.cutoff) == (
        "platform",
        MONTH,
        1,
        "2026-05-31",
    )
    assert (record.trigger, record.forced) == ("api", False)
    members = {repo: s.records.latest(repo, MONTH) for repo in ALL}
    assert [member["repo"] for member in record.members] == list(ALL)
    for member in record.members:
        own = members[member["repo"]]
        assert own is not None and (member["revision"], member["content_hash"]) == (own.revision, own.content_hash)
    assert record.pending == {"live": [], "unrecorded": [], "waiting": []}
    again, created_again = finalize_group(s, "platform", MONTH)
    assert not created_again and again.revision == 1 and again.content_hash == record.content_hash
    assert [r.revision for r in s.records.all_group("platform", MONTH)] == [1]


def test_forcing_adds_a_revision_and_reads_unrecorded_members_live(
    served: tuple[Flask, FlaskClient, Services, Path],
) -> None:
    _, _, s, _ = served
    record_members(s, (PUBLIC[0],))
    first, created = finalize_group(s, "platform", MONTH, force=True)
    assert created and first.revision == 1 and first.forced
    assert first.pending["live"] == [PUBLIC[1], SECRET] == first.pending["unrecorded"]
    assert [m["revision"] for m in first.members] == [1, None, None]
    record_members(s, (PUBLIC[1], SECRET))
    second, created = finalize_group(s, "platform", MONTH, force=True)
    assert created and second.revision == 2 and second.pending["live"] == []
    assert [r.revision for r in s.records.all_group("platform", MONTH)] == [1, 2]
    assert s.records.latest_group("platform", MONTH) == second


def test_a_month_that_has_not_ended_or_an_unknown_group_is_refused_and_nothing_changes(
    served: tuple[Flask, FlaskClient, Services, Path],
) -> None:
    _, _, s, _ = served
    record_members(s)
    # 2026-05-31T16:00Z is June 1 00:00 in Shanghai, the group's time zone: a second before, May is running.
    with pytest.raises(MonthNotEnded, match=r"2026-05 has not ended yet: it ends at 2026-05-31T16:00:00Z"):
        finalize_group(s, "platform", MONTH, now=datetime(2026, 5, 31, 15, 59, 59, tzinfo=UTC))
    with pytest.raises(WindowError, match="has not started yet"):
        finalize_group(s, "platform", "2026-06", now=datetime(2026, 5, 20, tzinfo=UTC))
    with pytest.raises(WindowError, match="is not a month"):
        finalize_group(s, "platform", "2026-13")
    with pytest.raises(UnknownGroup):
        finalize_group(s, "nope", MONTH)
    assert s.records.all_group("platform", MONTH) == []
    forced, created = finalize_group(s, "platform", MONTH, force=True, now=datetime(2026, 5, 20, 4, tzinfo=UTC))
    assert created and forced.cutoff == "2026-05-20" and json.loads(forced.document("json", ""))["final"] is False


def test_the_record_is_the_live_group_of_the_members_records_in_every_format(
    served: tuple[Flask, FlaskClient, Services, Path],
) -> None:
    _, client, s, _ = served
    record_members(s)
    record, _ = finalize_group(s, "platform", MONTH)
    for fmt, lang in DOCUMENTS:
        assert record.document(fmt, lang).encode("utf-8") == live_document(s, "platform", fmt, lang or "en")
    document = json.loads(record.document("json", ""))
    assert [m["repo"] for m in document["members"]] == list(ALL)
    assert (document["final"], document["hidden_members"], document["cutoff"]) == (True, False, "2026-05-31")
    assert SECRET_TITLE in record.document("md", "en") and SECRET_TITLE in record.document("html", "zh-CN")
    # Each member's row is its own record's numbers.
    for row in document["members"]:
        own = json.loads(get(client, f"/reports/{row['repo']}/{MONTH}.json", headers=ADMIN).data)
        assert row["stats"] == {key: own["stats"][key] for key in row["stats"]}


# --- serving -----------------------------------------------------------------------------------------------


def marked(s: Services, name: str, also: tuple[str, ...] = (), without: tuple[str, ...] = ()) -> GroupRecord:
    """A forced revision whose documents are a marker each: what a route serves from it cannot be a merge. `also`:
    members it names besides the latest record's (as when the group had them when it was frozen); `without`: those
    it leaves out (as when they joined the group later)."""
    latest = s.records.latest_group(name, MONTH)
    assert latest is not None
    extra = tuple({"repo": repo, "revision": 1, "content_hash": "0" * 64} for repo in also)
    documents = {key: f"record of {name} {key[0]} {key[1]}" for key in DOCUMENTS}
    stored = s.records.add_group(
        GroupRecord(
            latest.name,
            MONTH,
            0,
            latest.cutoff,
            latest.created_at,
            "api",
            True,
            tuple(m for m in latest.members if m["repo"] not in without) + extra,
            latest.config_hash,
            "0" * 64,
            latest.pending,
            documents,
        ),
        first_only=False,
    )
    assert stored is not None and stored.revision == latest.revision + 1
    return stored


@pytest.mark.parametrize(("fmt", "lang"), FORMATS)
def test_the_admin_is_served_the_record_byte_for_byte(
    served: tuple[Flask, FlaskClient, Services, Path], fmt: str, lang: str
) -> None:
    _, client, s, _ = served
    record_members(s)
    record, _ = finalize_group(s, "platform", MONTH)
    url = f"/reports/groups/platform/{MONTH}.{fmt}"
    assert get(client, url, headers=ADMIN, lang=lang).data == record.document(fmt, lang).encode("utf-8")
    marker = marked(s, "platform")
    answer = get(client, url, headers=ADMIN, lang=lang)
    assert answer.data == marker.document(fmt, lang).encode("utf-8")
    assert answer.headers["X-Tracker-Record"] == f"revision=2; content-hash={'0' * 64}"
    assert "X-Tracker-Record" not in get(client, url, headers=ADMIN, lang=lang, live="1").headers
    assert get(client, url, headers=ADMIN, lang=lang, cutoff="2026-05-31").data == marker.document(fmt, lang).encode()
    # Not the month's last day, or `?live=1`: the members merged, as before.
    assert get(client, url, headers=ADMIN, lang=lang, cutoff="2026-05-30").data != marker.document(fmt, lang).encode()
    live = get(client, url, headers=ADMIN, lang=lang, live="1").data
    assert live == live_document(s, "platform", fmt, lang)
    if fmt == "json":
        assert (
            get(client, f"/api/v1/groups/platform/months/{MONTH}", headers=ADMIN).data
            == marker.document("json", "").encode()
        )


@pytest.mark.parametrize(("fmt", "lang"), FORMATS)
def test_a_private_member_stays_hidden_from_others_when_the_group_has_a_record(
    served: tuple[Flask, FlaskClient, Services, Path], fmt: str, lang: str
) -> None:
    _, client, s, _ = served
    record_members(s)
    finalize_group(s, "platform", MONTH)
    marker = marked(s, "platform")
    answer = get(client, f"/reports/groups/platform/{MONTH}.{fmt}", lang=lang)
    text = answer.get_data(as_text=True)
    assert answer.data != marker.document(fmt, lang).encode() and "X-Tracker-Record" not in answer.headers
    assert SECRET not in text and SECRET_TITLE not in text
    assert "no-store" in answer.headers["Cache-Control"]  # the answer depends on who asks
    if fmt == "json":
        document = json.loads(text)
        assert document["hidden_members"] is True and [m["repo"] for m in document["members"]] == list(PUBLIC)


def test_a_reader_for_whom_a_member_is_hidden_gets_the_merge_even_of_a_record_without_it(
    served: tuple[Flask, FlaskClient, Services, Path],
) -> None:
    """A record frozen before the private member joined names public members alone; a reader who may not read
    that member still gets what they may see now (the merge, saying some members are hidden), not the record."""
    _, client, s, _ = served
    record_members(s)
    finalize_group(s, "platform", MONTH)
    older = marked(s, "platform", without=(SECRET,))
    anyone = get(client, f"/reports/groups/platform/{MONTH}.json")
    assert anyone.data != older.document("json", "").encode() and json.loads(anyone.data)["hidden_members"] is True
    assert (
        get(client, f"/reports/groups/platform/{MONTH}.json", headers=ADMIN).data == older.document("json", "").encode()
    )


def test_the_holder_of_a_link_to_every_private_member_is_served_the_record(
    served: tuple[Flask, FlaskClient, Services, Path],
) -> None:
    _, client, s, _ = served
    record_members(s)
    finalize_group(s, "platform", MONTH)
    marker = marked(s, "platform")
    token = sign_link(LINK_SECRET, SECRET, MONTH, None, timedelta(days=1))
    assert get(client, f"/reports/groups/platform/{MONTH}.md", token=token).data == marker.document("md", "en").encode()
    other = sign_link(LINK_SECRET, SECRET, "2026-04", None, timedelta(days=1))  # opens another month only
    hidden = get(client, f"/reports/groups/platform/{MONTH}.md", token=other).get_data(as_text=True)
    assert hidden != marker.document("md", "en") and SECRET not in hidden


def test_a_group_of_public_members_alone_serves_its_record_to_anyone(
    served: tuple[Flask, FlaskClient, Services, Path],
) -> None:
    _, client, s, _ = served
    record_members(s, PUBLIC)
    record, _ = finalize_group(s, "open", MONTH)
    for fmt, lang in FORMATS:
        assert get(client, f"/reports/groups/open/{MONTH}.{fmt}", lang=lang).data == record.document(fmt, lang).encode()
    marker = marked(s, "open")
    assert get(client, f"/reports/groups/open/{MONTH}.md").data == marker.document("md", "en").encode()
    # A record that names a private member (the group had it when it was frozen) is the admin's alone.
    named = marked(s, "open", also=(SECRET,))
    assert get(client, f"/reports/groups/open/{MONTH}.md", headers=ADMIN).data == named.document("md", "en").encode()
    for fmt, lang in FORMATS:
        anyone = get(client, f"/reports/groups/open/{MONTH}.{fmt}", lang=lang)
        assert anyone.data != named.document(fmt, lang).encode() and "X-Tracker-Record" not in anyone.headers
        assert json.loads(get(client, f"/reports/groups/open/{MONTH}.json").data)["hidden_members"] is False


# --- the schedule, the API ---------------------------------------------------------------------------------


def test_the_schedule_finalises_a_group_after_its_members(
    served: tuple[Flask, FlaskClient, Services, Path], caplog: pytest.LogCaptureFixture
) -> None:
    app, client, s, published = served
    from workers.jobs import due_work

    assert due_group_months(s, grace_seconds=0) == [("open", MONTH), ("platform", MONTH)]
    with caplog.at_level(logging.INFO, logger="workers.jobs"):
        first = due_work()  # the members' and the groups' finalisations queued; the groups' may run first
    assert first.startswith("3 months due, 2 groups' months due, 5 finalisations queued"), first
    run_jobs(app)
    # Whichever ran first, the members are recorded now; a group that ran before them is looked at again.
    for repo in ALL:
        assert s.records.latest(repo, MONTH) is not None
    due_work()
    run_jobs(app)
    assert due_group_months(s, grace_seconds=0) == []
    for name in ("open", "platform"):
        records = s.records.all_group(name, MONTH)
        assert [(r.revision, r.trigger, r.pending["live"]) for r in records] == [(1, "schedule", [])]
    assert due_work().startswith("0 months due, 0 finalisations queued")
    record = s.records.latest_group("platform", MONTH)
    assert record is not None
    assert group_file_path(published, "platform", MONTH, "en").read_text(encoding="utf-8") == as_file(
        record.document("md", "en"), MONTH, "en"
    )
    assert get(client, f"/reports/groups/platform/{MONTH}.html", headers=ADMIN).data == record.document(
        "html", "en"
    ).encode("utf-8")


def test_the_schedule_does_not_finalise_a_group_before_its_month_ends(
    served: tuple[Flask, FlaskClient, Services, Path],
) -> None:
    _, _, s, _ = served
    assert due_group_months(s, grace_seconds=0, now=datetime(2026, 5, 31, 15, 59, tzinfo=UTC)) == []
    assert due_group_months(s, grace_seconds=600, now=datetime(2026, 5, 31, 16, 5, tzinfo=UTC)) == []
    assert due_group_months(s, grace_seconds=600, now=datetime(2026, 5, 31, 16, 10, tzinfo=UTC)) == [
        ("open", MONTH),
        ("platform", MONTH),
    ]


FINALIZE = f"/api/v1/groups/platform/months/{MONTH}/finalize"
RECORDS = f"/api/v1/groups/platform/months/{MONTH}/records"


def test_the_finalize_endpoint(served: tuple[Flask, FlaskClient, Services, Path]) -> None:
    app, client, s, published = served
    assert client.post(FINALIZE).status_code == 401
    assert client.post(FINALIZE, headers={"Authorization": "Bearer wrong"}).status_code == 403
    unknown = client.post(f"/api/v1/groups/nope/months/{MONTH}/finalize", headers=ADMIN)
    assert unknown.status_code == 404 and unknown.json["groups"] == ["platform", "open"]
    bad = client.post("/api/v1/groups/platform/months/2026-13/finalize", headers=ADMIN)
    assert bad.status_code == 400 and "is not a month" in bad.json["error"]
    future = client.post("/api/v1/groups/platform/months/2099-01/finalize", headers=ADMIN)
    assert future.status_code == 400 and "has not started yet" in future.json["error"]
    waiting = client.post(FINALIZE, headers=ADMIN)
    assert waiting.status_code == 409 and waiting.json["members"] == list(ALL)
    assert "waits for its members' own records" in waiting.json["error"]
    assert get(client, RECORDS, headers=ADMIN).json["records"] == []
    record_members(s)
    started = client.post(FINALIZE, headers=ADMIN)
    assert started.status_code == 202 and started.headers["Location"].endswith(RECORDS)
    run_jobs(app)
    assert get(client, RECORDS, headers=ADMIN).json["records"][0]["revision"] == 1
    done = client.post(FINALIZE, headers=ADMIN)
    assert done.status_code == 200 and done.json["record"]["revision"] == 1
    assert client.post(FINALIZE, headers=ADMIN, query_string={"force": "1"}).status_code == 202
    run_jobs(app)
    records = get(client, RECORDS, headers=ADMIN).json
    assert [(r["revision"], r["forced"], r["trigger"]) for r in records["records"]] == [
        (1, False, "api"),
        (2, True, "api"),
    ]
    assert [m["repo"] for m in records["records"][0]["members"]] == list(ALL)
    assert "markdown_en" not in json.dumps(records) and records["group"] == "platform"
    # Published where the group says, once per content: the second revision has the same documents.
    english = group_file_path(published, "platform", MONTH, "en")
    chinese = group_file_path(published, "platform", MONTH, "zh-CN")
    assert english == published / "reports" / "groups" / "platform" / "en-US" / "2026" / "05.md"
    assert SECRET_TITLE in english.read_text(encoding="utf-8")  # the admin's act: every member
    assert "](../../en-US/2026/05.md)" in chinese.read_text(encoding="utf-8")
    kept = [p for p in s.records.publications() if p["repo"] == "group:platform"]
    assert [(p["kind"], p["edition"], p["result"]) for p in kept] == [
        ("files", "final", "unchanged"),
        ("files", "final", "written"),
    ]


def test_a_groups_records_are_the_admins_when_a_member_is_private(
    served: tuple[Flask, FlaskClient, Services, Path],
) -> None:
    _, client, s, _ = served
    record_members(s)
    finalize_group(s, "platform", MONTH)
    finalize_group(s, "open", MONTH)
    hidden = client.get(RECORDS)
    assert hidden.status_code == 404 and SECRET not in hidden.get_data(as_text=True)
    assert hidden.json["groups"] == ["platform", "open"]  # as for any unknown name: those with a public member
    assert [r["revision"] for r in get(client, RECORDS, headers=ADMIN).json["records"]] == [1]
    public = get(client, f"/api/v1/groups/open/months/{MONTH}/records").json
    assert [m["repo"] for m in public["records"][0]["members"]] == list(PUBLIC)
    assert get(client, "/api/v1/groups/nope/months/2026-05/records", 404).json["error"].startswith("no group 'nope'")
    assert "is not a month" in get(client, "/api/v1/groups/open/months/2026-5/records", 400).json["error"]


def test_a_group_waiting_for_a_member_is_looked_at_again_by_the_schedule(
    served: tuple[Flask, FlaskClient, Services, Path],
) -> None:
    app, _, s, _ = served
    from tracker.records.jobs import finalize_group_month
    from workers.jobs import due_work

    record_members(s, PUBLIC)
    said = finalize_group_month(s, "platform", MONTH, trigger="schedule")
    assert said == f"waiting for the members' records ({SECRET})"
    assert s.records.all_group("platform", MONTH) == []
    assert ("platform", MONTH) in due_group_months(s, grace_seconds=0)
    record_members(s, (SECRET,))
    due_work()
    run_jobs(app)
    record = s.records.latest_group("platform", MONTH)
    assert record is not None and (record.revision, record.trigger) == (1, "schedule")
    assert [m["revision"] for m in record.members] == [1, 1, 1]


def test_a_groups_publications_are_in_the_status_for_who_may_read_every_member(
    served: tuple[Flask, FlaskClient, Services, Path],
) -> None:
    _, client, s, published = served
    from tracker.records.publish import publish_group

    record_members(s)
    finalize_group(s, "platform", MONTH)
    assert publish_group(s, "platform", MONTH) == "files written"
    assert publish_group(s, "open", MONTH) == ""  # `open` publishes nowhere
    mine = [
        p for p in get(client, "/api/v1/status", headers=ADMIN).json["publications"] if p["repo"].startswith("group:")
    ]
    assert [(p["repo"], p["result"], p["target"]) for p in mine] == [("group:platform", "written", str(published))]
    anyone = get(client, "/api/v1/status").json["publications"]
    assert not [p for p in anyone if p["repo"].startswith("group:")]


def test_a_member_without_activity_in_the_month_needs_no_record(
    served: tuple[Flask, FlaskClient, Services, Path],
) -> None:
    _, _, s, _ = served
    assert ("platform", "2026-04") not in due_group_months(s, grace_seconds=0)  # nothing happened in April
    record, created = finalize_group(s, "platform", "2026-04")  # asked for all the same: nothing to wait for
    assert created and not record.forced and record.pending["live"] == list(ALL) and record.pending["unrecorded"] == []
    assert [m["revision"] for m in record.members] == [None, None, None]
    assert json.loads(record.document("json", ""))["totals"]["stats"]["merged"] == 0
