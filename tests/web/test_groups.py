"""Group reports (`tracker/web/groups.py`, issue 34 item 3), on SQLite and PostgreSQL: a group's table and
totals equal its members' own JSON documents, its themes cite every PR the members narrate exactly once with its
repository, a private member is invisible to a reader without access (rows, totals, themes, names) and shown to
the admin and to a link's holder, in Markdown, HTML and JSON, in English and Chinese.

Three repositories of made-up lives around real Megatron-LM PRs of May 2026 (titles, branches, changed paths),
through the webhook and the worker's jobs, the files of every head from the fake GitHub: `acme/widgets` and
`acme/gadgets` (public, the latter with a hostile title and a test-only PR), `acme/secret` (`public: false`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from pydantic import SecretStr

from bench.fixtures.paths import require_shared

require_shared()  # the fake GitHub (imported below) reads GitHub's example answers from ../shared as it loads

from bench.fixtures.factory import PullRequestStory  # noqa: E402
from bench.fixtures.fake_github import FakeGitHub  # noqa: E402
from bench.fixtures.scenario import real_prs  # noqa: E402
from tests.support.app import ACTIVE_GITHUB, post, run_jobs, running_app  # noqa: E402
from tracker.core.group_report import EXCLUSIONS, STATISTICS, area  # noqa: E402
from tracker.settings import Settings  # noqa: E402
from tracker.web.access import sign_link  # noqa: E402

MONTH = "2026-05"
CUTOFFS = ("2026-05-15", "2026-05-31")
PUBLIC = ("acme/widgets", "acme/gadgets")
SECRET = "acme/secret"
ALL = (*PUBLIC, SECRET)
ADMIN = {"Authorization": "Bearer test-admin-token"}
LINK_SECRET = "group-link-secret"
HOSTILE = "<img src=x onerror=alert(1)> & <b>bold</b> @someone #12"
SECRET_TITLE = "Classified: the secret scheduler"
CODED = "Fix `norm_out` <dtype> in the `MoE` router"  # identifiers quoted as GitHub shows them: code
TEST_ONLY = 91001
CONFIG = f"""
repositories:
  {SECRET}:
    public: false
groups:
  platform: [{PUBLIC[0]}, {PUBLIC[1]}, {SECRET}]
  acme: ["acme/*"]
  hush: [{SECRET}]
"""
GROUP = f"/reports/groups/platform/{MONTH}"
pytestmark = pytest.mark.xdist_group("groups")


def stories() -> dict[str, list[tuple[PullRequestStory, list[str]]]]:
    """Each repository's PRs and their files: 12 real PRs of May each (every fourth left open, one reverted
    pair aside), the secret one a title of its own, gadgets a hostile title and a test-only PR."""
    prs = sorted((pr for pr in real_prs() if pr["month_shanghai"] == MONTH), key=lambda pr: pr["committer_date"])
    made: dict[str, list[tuple[PullRequestStory, list[str]]]] = {}
    for index, repo in enumerate(ALL):
        made[repo] = []
        for offset, pr in enumerate(prs[index * 12 : index * 12 + 12]):
            merged_at = datetime.fromisoformat(pr["committer_date"])
            title = SECRET_TITLE if repo == SECRET and offset == 0 else pr["title"]
            title = HOSTILE if repo == PUBLIC[1] and offset == 0 else title
            title = CODED if repo == PUBLIC[1] and offset == 1 else title
            story = PullRequestStory(
                pr["pr_number"], merged_at - timedelta(days=2), repo=repo, base=pr["branch"], title=title
            )
            story.opened()
            if offset % 4 != 3:
                story.merged(merged_at)
            made[repo].append((story, [f["path"] for f in pr["files"]]))
    opened = datetime(2026, 5, 8, 2, tzinfo=UTC)
    test_only = PullRequestStory(TEST_ONLY, opened, repo=PUBLIC[1], title="Add tests for the router").opened()
    made[PUBLIC[1]].append((test_only.merged(opened + timedelta(days=1)), ["tests/unit_tests/test_router.py"]))
    return made


@pytest.fixture(scope="module")
def served(
    module_settings: Settings, github_server: FakeGitHub, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Flask, FlaskClient]]:
    """The three repositories' May, delivered once for the module's tests, which only read it."""
    config = tmp_path_factory.mktemp("config") / "tracker.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    settings = module_settings.model_copy(update={"config_path": config, "link_secret": SecretStr(LINK_SECRET)})
    github_server.reset()
    ACTIVE_GITHUB.append(github_server)
    try:
        with running_app(settings) as app:
            client = app.test_client()
            for repo, made in stories().items():
                for story, files in made:
                    for delivery in story.deliveries:
                        sha = json.loads(delivery.body)["pull_request"]["head"]["sha"]
                        github_server.set_files(repo, story.number, sha, files)
                        assert post(client, delivery.body, delivery.event, delivery.delivery_id).status_code == 202
                run_jobs(app)
            ACTIVE_GITHUB.clear()
            yield app, client
    finally:
        ACTIVE_GITHUB.clear()


def answer(
    client: FlaskClient, url: str, status: int = 200, headers: dict[str, str] | None = None, **params: Any
) -> Any:
    got = client.get(url, query_string=params, headers=headers or {})
    assert got.status_code == status, got.get_data(as_text=True)[:2000]
    return got


def member_document(client: FlaskClient, repo: str, cutoff: str) -> dict[str, Any]:
    """A member's own report, as its route serves it (the admin's: the secret one too)."""
    return answer(client, f"/reports/{repo}/{MONTH}.json", headers=ADMIN, cutoff=cutoff).get_json()


def group_document(client: FlaskClient, cutoff: str, headers: dict[str, str] | None = None, **params: Any) -> Any:
    return answer(client, f"{GROUP}.json", headers=headers, cutoff=cutoff, **params).get_json()


# --- the table and the themes equal the members' own reports ------------------------------------------


@pytest.mark.parametrize("cutoff", CUTOFFS)
def test_the_table_and_totals_are_the_members_own_numbers(served: tuple[Flask, FlaskClient], cutoff: str) -> None:
    _, client = served
    documents = {repo: member_document(client, repo, cutoff) for repo in ALL}
    for shown, headers in ((ALL, ADMIN), (PUBLIC, None)):
        group = group_document(client, cutoff, headers)
        assert [member["repo"] for member in group["members"]] == list(shown)
        for row in group["members"]:
            own = documents[row["repo"]]
            assert row["stats"] == {key: own["stats"][key] for key in STATISTICS}
            assert row["excluded"] == {key: own["excluded"][key] for key in EXCLUSIONS}
            assert row["pending_classification"] == own["pending_classification"]
            assert row["cutoff"] == cutoff
        for key in STATISTICS:
            assert group["totals"]["stats"][key] == sum(documents[repo]["stats"][key] for repo in shown)
        for key in EXCLUSIONS:
            assert group["totals"]["excluded"][key] == sum(documents[repo]["excluded"][key] for repo in shown)
    assert sum(documents[repo]["stats"]["merged"] for repo in ALL) > 0
    if cutoff == CUTOFFS[-1]:
        assert documents[PUBLIC[1]]["excluded"]["test_only"] >= 1  # the totals have an exclusion to add


@pytest.mark.parametrize("cutoff", CUTOFFS)
def test_themes_cite_every_narrated_pr_once_with_its_repository(served: tuple[Flask, FlaskClient], cutoff: str) -> None:
    _, client = served
    documents = {repo: member_document(client, repo, cutoff) for repo in ALL}
    group = group_document(client, cutoff, ADMIN)
    for section in group["sections"]:
        narrated = Counter(
            (repo, pr["number"])
            for repo, own in documents.items()
            for pr in own["pull_requests"]
            if pr["section"] == section["id"]
        )
        cited: Counter[tuple[str, int]] = Counter()
        for theme in section["themes"]:
            repos = set()
            for part in theme["parts"]:
                repos.add(part["repo"])
                assert area(part["en"]).casefold() == theme["en"].casefold()  # merged by the area its name ends with
                for change in part["changes"]:
                    for pr in change["prs"]:
                        assert pr["repo"] == part["repo"]
                        assert pr["url"] == f"https://github.com/{pr['repo']}/pull/{pr['number']}"
                        cited[(pr["repo"], pr["number"])] += 1
            assert theme["repos"] == [repo for repo in ALL if repo in repos]  # names the repositories it spans
            assert theme["changes"] == sum(len(part["changes"]) for part in theme["parts"])
        for line in section["reverted"]:
            for pr in (*line["prs"], *line["by"]):
                cited[(pr["repo"], pr["number"])] += 1
        assert cited == narrated  # every narrated PR once, each with its repository
        # A member's theme is one part of exactly one group theme.
        parts = [(part["repo"], part["theme"]) for theme in section["themes"] for part in theme["parts"]]
        own = [
            (repo, t["id"])
            for repo in ALL
            for s in documents[repo]["report"]["sections"]
            if s["id"] == section["id"]
            for t in s["themes"]
        ]
        assert sorted(parts) == sorted(own)
    spanning = [t for s in group["sections"] for t in s["themes"] if len(t["repos"]) > 1]
    assert spanning, "no theme spans two repositories: the merge is not exercised"


def test_the_api_answers_the_same_document(served: tuple[Flask, FlaskClient]) -> None:
    _, client = served
    api = answer(client, f"/api/v1/groups/platform/months/{MONTH}", cutoff="2026-05-15").get_json()
    assert api == group_document(client, "2026-05-15")
    # The month's last day is its default cutoff, and a group's name is matched without regard to case.
    assert answer(client, f"/reports/groups/PLATFORM/{MONTH}.json").get_json()["cutoff"] == "2026-05-31"
    assert answer(client, "/reports/groups/platform/current.json").get_json()["month"] != MONTH


def test_owner_star_is_every_repository_of_the_owner(served: tuple[Flask, FlaskClient]) -> None:
    _, client = served
    acme = answer(client, f"/reports/groups/acme/{MONTH}.json", headers=ADMIN).get_json()
    assert [member["repo"] for member in acme["members"]] == sorted(ALL)


# --- privacy -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "md", "html"])
@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_a_private_member_is_invisible_without_access(served: tuple[Flask, FlaskClient], fmt: str, lang: str) -> None:
    _, client = served
    secret = member_document(client, SECRET, "2026-05-31")
    got = answer(client, f"{GROUP}.{fmt}", lang=lang)
    body = got.get_data(as_text=True)
    assert got.headers["Cache-Control"] == "private, no-store"
    assert "secret" not in body.lower()  # neither its name nor a title nor a link
    public_titles = {
        pr["title"] for repo in PUBLIC for pr in member_document(client, repo, "2026-05-31")["pull_requests"]
    }
    for pr in secret["pull_requests"]:
        if pr["title"] not in public_titles and fmt == "json":
            assert json.dumps(pr["title"], ensure_ascii=False) not in body
    notice = {"json": '"hidden_members": true', "md": "not shown", "html": 'id="hidden-members"'}[fmt]
    if fmt == "md" and lang == "zh-CN":
        notice = "未显示"
    assert notice in body
    # With a wrong bearer token or a tampered link: the same answer.
    for params, headers in (({"token": "nonsense"}, {}), ({}, {"Authorization": "Bearer wrong"})):
        again = answer(client, f"{GROUP}.{fmt}", headers=headers, lang=lang, **params).get_data(as_text=True)
        assert "secret" not in again.lower()


def test_the_admin_and_a_links_holder_see_a_private_member(served: tuple[Flask, FlaskClient]) -> None:
    _, client = served
    admin = group_document(client, "2026-05-31", ADMIN)
    assert SECRET in [member["repo"] for member in admin["members"]] and admin["hidden_members"] is False
    token = sign_link(LINK_SECRET, SECRET, MONTH, None, timedelta(days=1))
    linked = group_document(client, "2026-05-31", token=token)
    assert linked == admin
    page = answer(client, f"{GROUP}.html", token=token).get_data(as_text=True)
    assert SECRET_TITLE in page and 'id="hidden-members"' not in page
    # The page's links keep the token; the secret member's report link carries it too.
    assert f'href="{MONTH}.md?token={token}&amp;' in page
    assert f'href="../../acme/secret/{MONTH}.html?token={token}&amp;' in page
    assert f'<input type="hidden" name="token" value="{token}">' in page
    # A link to another month, or to another repository, opens nothing here.
    for other in (
        sign_link(LINK_SECRET, SECRET, "2026-04", None, timedelta(days=1)),
        sign_link(LINK_SECRET, PUBLIC[0], MONTH, None, timedelta(days=1)),
    ):
        assert group_document(client, "2026-05-31", token=other)["hidden_members"] is True
    # An expired link: hidden, as for anyone without one.
    old = sign_link(LINK_SECRET, SECRET, MONTH, None, timedelta(minutes=1), now=datetime.now(UTC) - timedelta(hours=1))
    assert group_document(client, "2026-05-31", token=old)["hidden_members"] is True


def test_a_group_of_private_members_alone_is_unknown_to_others(served: tuple[Flask, FlaskClient]) -> None:
    _, client = served
    for fmt in ("json", "html"):
        refused = answer(client, f"/reports/groups/hush/{MONTH}.{fmt}", 404)
        unknown = answer(client, f"/reports/groups/nosuch/{MONTH}.{fmt}", 404)
        assert refused.get_data(as_text=True).replace("hush", "nosuch") == unknown.get_data(as_text=True)
        assert "hush" not in unknown.get_data(as_text=True)
    assert answer(client, f"/reports/groups/nosuch/{MONTH}.json", 404).get_json()["groups"] == ["platform", "acme"]
    admin = answer(client, f"/reports/groups/hush/{MONTH}.json", headers=ADMIN).get_json()
    assert [member["repo"] for member in admin["members"]] == [SECRET]
    assert answer(client, f"/reports/groups/nosuch/{MONTH}.json", 404, headers=ADMIN).get_json()["groups"] == [
        "platform",
        "acme",
        "hush",
    ]


# --- errors ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "params", "status", "says"),
    [
        (f"{GROUP}.json", {"cutoff": "2026-13-01"}, 400, "is not a real day"),
        (f"{GROUP}.html", {"cutoff": "2026-06-01"}, 400, "is outside 2026-05"),
        ("/reports/groups/platform/2026-5.json", {}, 400, "2026-5"),
        ("/reports/groups/platform/2999-01.json", {}, 400, "has not started yet"),
        ("/api/v1/groups/platform/months/May", {}, 400, "May"),
        (f"{GROUP}.md", {"lang": "fr"}, 400, "use en or zh-CN"),
        (f"{GROUP}.pdf", {}, 404, ".md, .html or .json"),
        ("/api/v1/groups/nosuch/months/2026-05", {}, 404, "no group 'nosuch' to show"),
    ],
)
def test_bad_requests_say_why(
    served: tuple[Flask, FlaskClient], url: str, params: dict[str, str], status: int, says: str
) -> None:
    _, client = served
    got = answer(client, url, status, **params)
    assert says in got.get_data(as_text=True)
    if url.endswith(".html") and status != 404:
        assert got.content_type.startswith("text/html")


# --- both languages, untrusted titles ---------------------------------------------------------------------


def test_english_and_chinese(served: tuple[Flask, FlaskClient]) -> None:
    _, client = served
    en = answer(client, f"{GROUP}.md", cutoff="2026-05-31").get_data(as_text=True)
    zh = answer(client, f"{GROUP}.md", cutoff="2026-05-31", lang="zh-CN").get_data(as_text=True)
    for heading in ("## Repositories", "## Delivered", "## In Progress", "## Scope and Method", "| **Total** |"):
        assert heading in en and heading not in zh
    for heading in (
        "## 仓库",
        "## 已交付成果",
        "## 进行中的方向",
        "## 口径说明",
        "| **合计** |",
        "| 仓库 | 新开 | 合并 |",
    ):
        assert heading in zh and heading not in en
    assert "Group Monthly Activity Report" in en and "仓库组月度活动报告" in zh
    # Repository names and PR titles verbatim in both (cleaned and escaped alike).
    title = next(story.title for story, _ in stories()[PUBLIC[0]] if story.title and "_" not in story.title)
    assert title in en and f"“{title}”" in zh
    assert "[acme/widgets#" in en and "[acme/widgets#" in zh
    html_zh = answer(client, f"{GROUP}.html", lang="zh-CN").get_data(as_text=True)
    assert '<html lang="zh-CN">' in html_zh and '<th scope="col">仓库</th>' in html_zh and "合计" in html_zh


def test_a_hostile_title_is_inert(served: tuple[Flask, FlaskClient]) -> None:
    _, client = served
    page = answer(client, f"{GROUP}.html").get_data(as_text=True)
    assert "<img" not in page and "<b>bold" not in page
    assert "&lt;img src=x onerror=alert(1)&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in page
    markdown = answer(client, f"{GROUP}.md").get_data(as_text=True)
    assert not re.search(r"(?<!\\)<(img|b>)", markdown)  # every `<` of the title escaped
    assert "\\<img src=x onerror=alert(1)\\> \\& \\<b\\>bold\\</b\\>" in markdown
    assert "@<!-- -->someone #<!-- -->12" in markdown  # no mention, no cross-reference once posted to GitHub
    document = group_document(client, "2026-05-31")
    titles = [c["title"] for s in document["sections"] for t in s["themes"] for p in t["parts"] for c in p["changes"]]
    assert any(title.startswith("<img src=x") for title in titles)  # the JSON keeps the data


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_backticks_of_a_title_are_code_in_html_and_literal_in_markdown(
    served: tuple[Flask, FlaskClient], lang: str
) -> None:
    """As in a repository's report: GitHub shows a title's `...` as code; the HTML does too, escaped inside."""
    _, client = served
    titles = [
        c["title"]
        for s in group_document(client, "2026-05-31")["sections"]
        for t in s["themes"]
        for p in t["parts"]
        for c in p["changes"]
    ]
    assert CODED in titles
    page = answer(client, f"{GROUP}.html", lang=lang).get_data(as_text=True)
    assert "Fix <code>norm_out</code> &lt;dtype&gt; in the <code>MoE</code> router" in page
    assert "`norm_out`" not in page
    markdown = answer(client, f"{GROUP}.md", lang=lang).get_data(as_text=True)
    assert "Fix \\`norm\\_out\\` \\<dtype\\> in the \\`MoE\\` router" in markdown


def test_a_member_changed_changes_the_cached_group(served: tuple[Flask, FlaskClient]) -> None:
    app, client = served
    before = group_document(client, "2026-05-31")
    assert group_document(client, "2026-05-31") == before  # from the cache
    opened = datetime(2026, 5, 20, 2, tzinfo=UTC)
    story = PullRequestStory(91002, opened, repo=PUBLIC[0], title="Add a late feature").opened()
    for delivery in story.deliveries:
        assert post(client, delivery.body, delivery.event, delivery.delivery_id).status_code == 202
    run_jobs(app)
    after = group_document(client, "2026-05-31")
    assert after["totals"]["stats"]["opened"] + after["totals"]["pending_classification"] > (
        before["totals"]["stats"]["opened"] + before["totals"]["pending_classification"]
    )


def test_a_repository_of_the_account_groups_keeps_its_reports(served: tuple[Flask, FlaskClient]) -> None:
    """/reports/groups/<name>/… is a group's report; a repository named `groups/<name>` is served there as any
    repository when no group has that name, and a group of that name wins."""
    app, client = served
    opened = datetime(2026, 5, 21, 2, tzinfo=UTC)
    for repo in ("groups/tools", "groups/platform"):
        story = PullRequestStory(91003, opened, repo=repo, title="Add a tool").opened()
        for delivery in story.deliveries:
            assert post(client, delivery.body, delivery.event, delivery.delivery_id).status_code == 202
    run_jobs(app)
    document = answer(client, f"/reports/groups/tools/{MONTH}.json", cutoff="2026-05-31").get_json()
    assert document["repo"] == "groups/tools" and [pr["number"] for pr in document["pull_requests"]] == [91003]
    assert group_document(client, "2026-05-31")["group"] == "platform"  # the group, not the repository
    answer(client, f"/reports/groups/nothing/{MONTH}.json", 404)
