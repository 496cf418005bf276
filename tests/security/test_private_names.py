"""Issue 31, item 3: nothing about a private repository in an anonymous answer, a metric label or an
error; to a reader without access a private name is answered as an unknown one (same status, body
and headers), while the admin (and a link's holder, for its month) still sees everything.

The real app over real deliveries: a private repository and a public one, May 2026.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from flask import Flask
from flask.testing import FlaskClient
from pydantic import SecretStr

from bench.fixtures.factory import Delivery, pr_payload
from bench.fixtures.paths import needs_shared
from tests.support.app import post, run_jobs, running_app
from tracker.github.quota import Quota
from tracker.settings import Settings
from tracker.web.access import sign_link
from tracker.web.context import services

pytestmark = needs_shared

PRIVATE = "Secret-Org/Internal"
UNKNOWN = "Secret-Org/Nothing"  # no delivery, no config: a name the tracker knows nothing of
PUBLIC = "octo/open"
LINK_SECRET = "test-link-secret-0123456789"
METRICS_TOKEN = "metrics-token-0123456789"
ADMIN = {"Authorization": "Bearer test-admin-token"}  # the `settings` fixture's admin token


@pytest.fixture
def both(settings: Settings, tmp_path: Path) -> Iterator[tuple[Flask, FlaskClient]]:
    config = tmp_path / "tracker.yaml"
    config.write_text(f"repositories:\n  {PRIVATE}:\n    public: false\n", encoding="utf-8")
    with running_app(settings.model_copy(update={"config_path": config, "link_secret": SecretStr(LINK_SECRET)})) as app:
        client = app.test_client()
        for number, repo in ((1, PRIVATE), (2, PUBLIC)):
            payload = pr_payload("opened", number, created_at="2026-05-04T02:00:00Z", repo=repo)
            assert post(client, payload, "pull_request", f"may-{number}").status_code == 202
        run_jobs(app)
        yield app, client


def link(repo: str, **kwargs: Any) -> str:
    return sign_link(LINK_SECRET, repo, "2026-05", None, kwargs.pop("lifetime", timedelta(days=7)), **kwargs)


def hour_ago() -> datetime:
    return datetime.now(UTC) - timedelta(hours=1)


# Readers without access to the private repository, each as (headers, query).
READERS = {
    "anonymous": ({}, {}),
    "wrong bearer token": ({"Authorization": "Bearer test-admin-tokeN"}, {}),
    "basic credentials": ({"Authorization": "Basic dXNlcjpwdw=="}, {}),
    "tampered link": ({}, {"token": "not-a-link"}),
    "link for another repository": ({}, {"token": "another"}),
    "expired link for another repository": ({}, {"token": "another-expired"}),
    "link signed with another secret": ({}, {"token": "forged"}),
}
PATHS = [
    "/reports/{name}/2026-05.md",
    "/reports/{name}/2026-05.html",
    "/reports/{name}/2026-05.json?cutoff=2026-05-10",
    "/reports/{name}/1999-13.md",  # a bad month says nothing more either
    "/api/v1/repos/{name}/months/2026-05",
    "/api/v1/repos/{name}/months/2026-05/records",
    "/api/v1/repos/{name}/history",
]


def token_for(kind: str | None) -> str | None:
    return {
        None: None,
        "not-a-link": "not-a-link",
        "another": link(PUBLIC),
        "another-expired": link("Secret-Org/Other", lifetime=timedelta(minutes=1), now=hour_ago()),
        "forged": sign_link("another-secret", PRIVATE, "2026-05", None, timedelta(days=7)),
    }[kind]


def seen(client: FlaskClient, path: str, headers: dict[str, str], query: dict[str, str]) -> tuple[Any, ...]:
    """What a reader learns from an answer: its status, the headers that differ between answers, its body."""
    token = token_for(query.get("token"))
    if token:
        path += ("&" if "?" in path else "?") + urlencode({"token": token})
    answer = client.get(path, headers=headers)
    kept = {name: answer.headers.get(name) for name in ("Content-Type", "Cache-Control", "WWW-Authenticate")}
    return answer.status_code, kept, answer.get_data(as_text=True)


@pytest.mark.parametrize("reader", list(READERS))
def test_a_private_name_is_answered_as_an_unknown_one(both: tuple[Flask, FlaskClient], reader: str) -> None:
    """Before: 401 (or 403, or 503) for the private name where the unknown one was 404 (or 200 for
    the history): the difference told outsiders which names exist."""
    _, client = both
    headers, query = READERS[reader]
    for path in PATHS:
        private = seen(client, path.format(name=PRIVATE), headers, query)
        unknown = seen(client, path.format(name=UNKNOWN), headers, query)
        assert private[:2] == unknown[:2], path
        assert private[2].replace(PRIVATE, UNKNOWN) == unknown[2], path
        assert private[0] == 404 or '"runs":[]' in private[2], path
        assert "Work 1" not in private[2]


def test_the_admin_and_a_links_holder_still_see_the_private_repository(both: tuple[Flask, FlaskClient]) -> None:
    _, client = both
    for path in PATHS[:3] + PATHS[4:]:
        answer = client.get(path.format(name=PRIVATE), headers=ADMIN)
        assert answer.status_code == 200, (path, answer.get_data(as_text=True))
    assert client.get(f"/reports/{PRIVATE}/2026-05.md", query_string={"token": link(PRIVATE)}).status_code == 200
    # The holder of this repository's expired link was let in before: told when it expired.
    old = link(PRIVATE, lifetime=timedelta(minutes=1), now=hour_ago())
    expired = client.get(f"/reports/{PRIVATE}/2026-05.md", query_string={"token": old})
    assert expired.status_code == 403
    assert expired.json["error"].startswith("the link expired at")


# --- /metrics -------------------------------------------------------------------------------------


def test_open_metrics_leave_the_private_repository_out(both: tuple[Flask, FlaskClient]) -> None:
    """Before: tracker_repository_last_delivery_age_seconds{repository="Secret-Org/Internal"} for anyone."""
    _, client = both
    text = client.get("/metrics").get_data(as_text=True)
    assert f'tracker_repository_last_delivery_age_seconds{{repository="{PUBLIC}"}}' in text
    assert PRIVATE not in text and PRIVATE.lower() not in text


def test_metrics_behind_their_token_show_every_repository(settings: Settings, tmp_path: Path) -> None:
    config = tmp_path / "tracker.yaml"
    config.write_text(f"repositories:\n  {PRIVATE}:\n    public: false\n", encoding="utf-8")
    update = {"config_path": config, "metrics_token": SecretStr(METRICS_TOKEN)}
    with running_app(settings.model_copy(update=update)) as app:
        client = app.test_client()
        for number, repo in ((1, PRIVATE), (2, PUBLIC)):
            payload = pr_payload("opened", number, created_at="2026-05-04T02:00:00Z", repo=repo)
            assert post(client, payload, "pull_request", f"may-{number}").status_code == 202
        run_jobs(app)
        text = client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}).get_data(as_text=True)
    for name in (PRIVATE, PUBLIC):
        assert f'tracker_repository_last_delivery_age_seconds{{repository="{name}"}}' in text


# --- /api/v1/status -------------------------------------------------------------------------------


def test_anonymous_status_says_nothing_of_the_private_repository(both: tuple[Flask, FlaskClient]) -> None:
    """Before: its failed deliveries (name and error), GitHub's last error naming it, and the
    publications' target paths were in everyone's status."""
    app, client = both
    with app.app_context():
        s = services()
        for number, repo in ((7, PRIVATE), (8, PUBLIC)):
            body = json.dumps(pr_payload("opened", number, created_at="2026-05-06T02:00:00Z", repo=repo)).encode()
            assert s.ledger.store(Delivery("pull_request", f"poison-{number}", body).as_ledger_delivery())
            s.ledger.record_attempt_failed(f"poison-{number}", f"ValueError: {repo}#{number} broke", final=True)
        Quota(s.require_redis()).record_error(f"the files of {PRIVATE}#1 at 0123456789ab: GitHub answered 404", None)
        s.records.record_publication(
            PUBLIC,
            "2026-05",
            kind="issue",
            edition="final",
            target=f"{PRIVATE}#12",
            content_hash="0" * 64,
            result="failed",
            detail=f"GitHub answered 404 for /repos/{PRIVATE}/issues",
        )
    anonymous = client.get("/api/v1/status")
    text = anonymous.get_data(as_text=True)
    assert PRIVATE not in text and PRIVATE.lower() not in text
    document = anonymous.json
    assert document["deliveries"]["failed"] == 2  # a count names nothing
    assert [f["repo"] for f in document["failed_deliveries"]] == [PUBLIC]
    assert document["github"]["last_error"] is None
    [publication] = document["publications"]
    assert publication["repo"] == PUBLIC and "target" not in publication and "detail" not in publication

    admin = client.get("/api/v1/status", headers=ADMIN).json
    assert {f["repo"] for f in admin["failed_deliveries"]} == {PRIVATE, PUBLIC}
    assert PRIVATE in admin["github"]["last_error"]["message"]
    assert admin["publications"][0]["target"] == f"{PRIVATE}#12"


def test_without_private_repositories_anyone_sees_githubs_last_error(app: Flask, client: FlaskClient) -> None:
    with app.app_context():
        Quota(services().require_redis()).record_error(f"the files of {PUBLIC}#1 at 0123456789ab: boom", None)
    assert client.get("/api/v1/status").json["github"]["last_error"]["message"].endswith("boom")
