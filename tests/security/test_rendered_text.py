"""Issue 8, the rendered-text items: what a hostile PR title and base branch can do to a report.

One PR, delivered through the real webhook and worker, carries a title with a right-to-left override
(U+202E), a zero-width space (U+200B), an 8-bit CSI (U+009B), a URL, a www. address, an e-mail
address, an @mention, a team mention, a `<script>` tag, a newline, a `## heading` and an issue
reference, on the base branch `rel_v1*x*`. The Markdown, HTML and JSON reports are fetched over
HTTP and must show it inertly: nothing invisible, nothing that GitHub would link, mention or
reference once the Markdown is posted to an issue, no structure, and links built only from the
repository and the PR number.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import needs_shared
from tests.support.app import post, run_jobs

pytestmark = needs_shared

REPO = "acme/my_repo"
MONTH, CUTOFF = "2026-05", "2026-05-20"
BASE = "rel_v1*x*"
TITLE = (
    "Fix \u202egnp.exe\u200b loader\u009b31m: see https://evil.example/x and www.evil.example, "
    "mail me@evil.example, cc @alice @acme/core-team <script>alert(1)</script>\n## heading closes #12"
)
# What a reader must see of it: one line, the invisible and control characters gone.
SEEN = (
    "Fix gnp.exe loader 31m: see https://evil.example/x and www.evil.example, "
    "mail me@evil.example, cc @alice @acme/core-team <script>alert(1)</script> ## heading closes #12"
)
# The same in the Markdown: structure escaped, autolinks broken by a backslash, mentions, e-mail and
# the reference split by an empty HTML comment (tracker/reports/render.py says why).
SEEN_MD = (
    r"Fix gnp.exe loader 31m: see https\://evil.example/x and www\.evil.example, "
    r"mail me@<!-- -->evil.example, cc @<!-- -->alice @<!-- -->acme/core-team "
    r"\<script\>alert(1)\</script\> ## heading closes #<!-- -->12"
)
INVISIBLE_OR_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")
CITATION = re.compile(r"\[((?:[^\[\]\\]|\\.)+) #(\d+)\]\(https://github\.com/acme/my_repo/pull/(\d+)\)")


@pytest.fixture
def reports(app: Flask, client: FlaskClient, github: Any) -> dict[str, str]:
    """The hostile PR delivered and processed; each report of its month, fetched over HTTP."""
    story = PullRequestStory(1, datetime(2026, 5, 3, 9, tzinfo=UTC), repo=REPO, base=BASE, title=TITLE).opened()
    for delivery in story.deliveries:
        assert post(client, delivery.body, delivery.event, delivery.delivery_id).status_code == 202
    run_jobs(app)
    fetched = {}
    for name, lang in (("md", "en"), ("md", "zh-CN"), ("html", "en"), ("html", "zh-CN"), ("json", "en")):
        answer = client.get(f"/reports/{REPO}/{MONTH}.{name}", query_string={"cutoff": CUTOFF, "lang": lang})
        assert answer.status_code == 200, answer.get_data(as_text=True)
        fetched[f"{name}:{lang}"] = answer.get_data(as_text=True)
    return fetched


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_markdown_shows_the_title_as_one_inert_line(reports: dict[str, str], lang: str) -> None:
    markdown = reports[f"md:{lang}"]
    assert not INVISIBLE_OR_CONTROL.search(markdown)
    # Its highlight's line, and the overview's sentence that names it as its theme's headline change.
    carrying = [line for line in markdown.splitlines() if "gnp.exe" in line]
    assert len(carrying) == 2 and carrying[1].startswith("- **")
    assert all(SEEN_MD in line for line in carrying)
    assert not any(line.startswith("## heading") for line in markdown.splitlines())
    ours = re.sub(r"^<details><summary>[^<>]*</summary>$|^</details>$", "", markdown, flags=re.MULTILINE)
    assert not re.search(r"(?<!\\)<(?!!-- -->)", ours), "raw HTML other than the empty comments and the folds"


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_markdown_gives_github_nothing_to_link_mention_or_reference(reports: dict[str, str], lang: str) -> None:
    markdown = reports[f"md:{lang}"]
    # Every `://` GitHub would read is in a link the report built: the source and the citation.
    for url in re.findall(r"\S*(?<!\\)://\S*", markdown):
        assert re.fullmatch(r".*\]\(https://github\.com/acme/my_repo(/pull/1)?\)\W*", url), url
    assert not re.search(r"(?i)www\.", markdown), "a www. autolink"
    assert not re.search(r"@(?!<!-- -->)", markdown), "an @ GitHub would read as a mention or an e-mail"
    outside_citations = CITATION.sub("", markdown)
    assert not re.search(r"#\d|(?i:gh)-\d", outside_citations), "an issue reference"


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_markdown_escapes_the_branch_and_code_spans_the_repository(reports: dict[str, str], lang: str) -> None:
    markdown = reports[f"md:{lang}"]
    # `*x*` and `_` of the branch render as themselves, not as emphasis.
    assert r"[rel\_v1\*x\* #1](https://github.com/acme/my_repo/pull/1)" in markdown
    assert [(re.sub(r"\\(.)", r"\1", base), int(n)) for base, n, _ in CITATION.findall(markdown)] == [(BASE, 1)]
    # A code span takes no backslash escape: the name is in one as it is.
    assert "[`acme/my_repo`](https://github.com/acme/my_repo)" in markdown
    scope = "pull requests of `acme/my_repo` with activity" if lang == "en" else "本报告统计 `acme/my_repo` 在"
    assert scope in markdown
    assert r"`acme/my\_repo`" not in markdown


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_html_escapes_the_title_and_links_only_to_github(reports: dict[str, str], lang: str) -> None:
    html = reports[f"html:{lang}"]
    assert not INVISIBLE_OR_CONTROL.search(html)
    assert "<script" not in html.lower()
    assert SEEN.replace("<", "&lt;").replace(">", "&gt;") in html
    assert '<a class="cite" href="https://github.com/acme/my_repo/pull/1">rel_v1*x* #1</a>' in html
    for target in re.findall(r'(?:href|action|src)="([^"]*)"', html):
        assert target.startswith("https://github.com/acme/my_repo") or "://" not in target, target
        assert not target.lower().startswith(("javascript:", "data:")), target


def test_json_keeps_the_title_as_sent_with_invisible_characters_escaped(reports: dict[str, str]) -> None:
    body = reports["json:en"]
    # Raw bytes: nothing a terminal or a viewer would act on or hide; each is a `\u` escape instead.
    assert not INVISIBLE_OR_CONTROL.search(body)
    assert "\\u202e" in body and "\\u200b" in body and "\\u009b" in body
    document: dict[str, Any] = json.loads(body)
    (pr,) = document["pull_requests"]
    assert (pr["title"], pr["base_ref"]) == (TITLE, BASE)  # the data, as GitHub sent it
    assert pr["url"] == "https://github.com/acme/my_repo/pull/1"
    assert pr["section"] == "in_progress"
    titles = [
        change["title"]
        for section in document["report"]["sections"]
        for theme in section["themes"]
        for highlight in theme["highlights"]
        for change in highlight["changes"]
    ]
    assert titles == [SEEN]  # the outline is the report's text: cleaned like the Markdown and the HTML
