"""Publishing a month's report to its GitHub issue, against the local fake GitHub."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from bench.fixtures.paths import require_shared

require_shared()  # the fake GitHub (imported below) reads GitHub's example answers from ../shared as it loads

from bench.fixtures.fake_github import FakeGitHub, Scripted  # noqa: E402
from tracker.github.client import GitHubClient, RateLimited, RequestRefused, Unavailable  # noqa: E402
from tracker.github.issues import (  # noqa: E402
    BODY_LIMIT,
    carries_marker,
    content_hash,
    fit_body,
    github_length,
    marker,
    publish_issue,
)

SOURCE = "NVIDIA/Megatron-LM"
TARGET = "octo-org/activity-reports"
MONTH = "2026-09"
TITLE = "NVIDIA/Megatron-LM Monthly Activity Report — September 2026 (Final, through September 30, 2026)"
FULL = "https://tracker.example.org/reports/NVIDIA/Megatron-LM/2026-09.md?cutoff=2026-09-30"
MARKER = "<!-- monthly-activity-tracker repo=NVIDIA/Megatron-LM month=2026-09 -->"


def report(delivered: int = 3, in_progress: int = 2, bullets: int = 3, word: str = "change") -> str:
    """A report in the shape of tracker/reports/templates/report.en.md.j2."""
    lines = [
        f"# {TITLE}",
        "",
        "> Chinese version: [中文版本](2026-09.md?lang=zh-CN&cutoff=2026-09-30)",
        "",
        "> Reporting window: 2026-09-01 through 2026-09-30 (Asia/Shanghai); source: [`NVIDIA/Megatron-LM`](https://github.com/NVIDIA/Megatron-LM).",
        "",
        "## Overview",
        "",
        "September's work centred on the themes below.",
        "",
        "- Substantive PR activity after filtering: opened 120; merged 80; closed without merge 5; active at cutoff 3.",
        "- Excluded from the report and statistics: test-only 4, CI-only 2, test/CI-only 1, format-only 0.",
    ]
    number = 1000
    for heading, count in (("Delivered", delivered), ("In Progress", in_progress)):
        lines += ["", f"## {heading}"]
        for t in range(count):
            lines += ["", f"### {heading} theme {t}", "", f"{count} pull requests in this theme.", ""]
            for b in range(bullets):
                number += 1
                cite = f"[main #{number}](https://github.com/NVIDIA/Megatron-LM/pull/{number})"
                lines.append(f"- **Area {b}**: a {word} to area {b} of theme {t}. ({cite})")
    lines += ["", "## Scope and Method", "", "The report covers pull requests of `NVIDIA/Megatron-LM` ..."]
    return "\n".join(lines) + "\n"


@pytest.fixture
def fake(github: FakeGitHub) -> FakeGitHub:
    return github


def client_for(fake: FakeGitHub, **options: Any) -> GitHubClient:
    options.setdefault("max_backoff", 0.05)
    options.setdefault("write_interval", 0.0)
    return GitHubClient(fake.url, "secret-token-123", **options)


def publish(client: GitHubClient, markdown: str | None = None, **options: Any) -> Any:
    options.setdefault("full_report_url", FULL)
    options.setdefault("title", TITLE)
    return publish_issue(client, TARGET, SOURCE, MONTH, markdown=report() if markdown is None else markdown, **options)


def issues_on(fake: FakeGitHub) -> list[dict[str, Any]]:
    return [i for i in (fake.issue(TARGET, n) for n in range(1, 500)) if i is not None]


def writes(fake: FakeGitHub) -> list[tuple[str, str]]:
    return [(w.method, w.path) for w in fake.writes]


# --- publishing --------------------------------------------------------------------------------------


def test_the_first_publication_creates_the_issue_with_the_marker_line(fake: FakeGitHub) -> None:
    with client_for(fake) as client:
        published = publish(client)
    assert published.action == "created"
    assert (published.number, published.url) == (1, f"https://github.com/{TARGET}/issues/1")
    issue = fake.issue(TARGET, 1)
    assert issue is not None and issue["title"] == TITLE and issue["state"] == "open"
    assert issue["body"] == MARKER + "\n" + report()
    assert published.content_hash == content_hash(TITLE, issue["body"]) and not published.truncated
    assert writes(fake) == [("POST", f"/repos/{TARGET}/issues")]
    # Nothing is added that mentions someone or refers to an issue: only the marker line, hidden.
    assert "@" not in issue["body"].replace(report(), "")


def test_a_new_publication_updates_title_and_body_in_place_with_one_patch(fake: FakeGitHub) -> None:
    with client_for(fake) as client:
        first = publish(client, report(delivered=2), title=TITLE.replace("Final, ", ""))
        fake.writes.clear()
        second = publish(client, report(delivered=3), known_number=first.number)
    assert (second.action, second.number) == ("updated", first.number)
    assert writes(fake) == [("PATCH", f"/repos/{TARGET}/issues/1")]
    assert set(fake.writes[0].payload) == {"title", "body"}
    assert len(issues_on(fake)) == 1
    issue = fake.issue(TARGET, 1)
    assert issue is not None and issue["title"] == TITLE and issue["body"] == MARKER + "\n" + report(delivered=3)
    assert second.content_hash != first.content_hash


def test_only_what_changed_is_sent(fake: FakeGitHub) -> None:
    with client_for(fake) as client:
        publish(client)
        fake.writes.clear()
        publish(client, known_number=1, title=TITLE + " (corrected)")
    assert fake.writes[0].payload == {"title": TITLE + " (corrected)"}


def test_unchanged_content_writes_nothing(fake: FakeGitHub) -> None:
    with client_for(fake) as client:
        first = publish(client)
        fake.writes.clear()
        again = publish(client, known_number=first.number)
        recovered = publish(client)  # the number lost as well: found by its marker, still no write
    assert (again.action, recovered.action) == ("unchanged", "unchanged")
    assert again.content_hash == first.content_hash
    assert fake.writes == []


def test_a_body_saved_from_the_web_editor_with_crlf_is_unchanged(fake: FakeGitHub) -> None:
    with client_for(fake) as client:
        publish(client)
        issue = fake.issue(TARGET, 1)
        assert issue is not None
        fake.edit_issue(TARGET, 1, body=issue["body"].replace("\n", "\r\n"))
        fake.writes.clear()
        assert publish(client, known_number=1).action == "unchanged"
    assert fake.writes == []


def test_a_hand_edited_body_is_put_back(fake: FakeGitHub) -> None:
    with client_for(fake) as client:
        publish(client)
        fake.edit_issue(TARGET, 1, body=MARKER + "\nsomeone's notes")
        assert publish(client, known_number=1).action == "updated"
    issue = fake.issue(TARGET, 1)
    assert issue is not None and issue["body"] == MARKER + "\n" + report()


@pytest.mark.parametrize("known_number", [None, 2, 404])
def test_the_issue_is_found_by_its_marker_when_the_stored_number_is_lost(fake: FakeGitHub, known_number: Any) -> None:
    fake.add_issue(TARGET, "Monthly report", MARKER + "\n" + report(delivered=1))  # #1: ours
    fake.add_issue(TARGET, "An unrelated issue", "Please look at this.")  # #2
    for n in range(3, 140):  # a second page of newer issues, some closed, a PR quoting the marker
        fake.add_issue(TARGET, f"Issue {n}", f"Body {n}", state="closed" if n % 3 else "open")
    fake.add_issue(TARGET, "A PR that quotes the marker", MARKER + "\nquoted", pull_request=True)
    fake.add_issue(TARGET, "August's report", MARKER.replace("2026-09", "2026-08") + "\n" + report())
    with client_for(fake) as client:
        published = publish(client, known_number=known_number)
    assert (published.action, published.number) == ("updated", 1)
    assert writes(fake) == [("PATCH", f"/repos/{TARGET}/issues/1")]
    assert fake.count(r"^/repositories/\d+/issues\?.*page=2") == 1  # the second page, from the Link header
    assert fake.count(r"state=all") >= 1


def test_the_marker_matches_the_repository_without_regard_to_case(fake: FakeGitHub) -> None:
    fake.add_issue(TARGET, "Monthly report", marker("nvidia/megatron-lm", MONTH) + "\nold")
    with client_for(fake) as client:
        assert publish(client).number == 1
    assert len(issues_on(fake)) == 1


def test_with_a_creator_an_issue_someone_else_opened_with_the_marker_is_left_alone(fake: FakeGitHub) -> None:
    planted = fake.add_issue(TARGET, "Looks like a report", MARKER + "\nplanted", login="mallory")
    with client_for(fake) as client:
        published = publish(client, known_number=planted["number"], creator=fake.login)
        again = publish(client, creator=fake.login)
    assert (published.action, published.number) == ("created", 2)
    assert (again.action, again.number) == ("unchanged", 2)
    planted_now = fake.issue(TARGET, 1)
    assert planted_now is not None and planted_now["body"] == MARKER + "\nplanted"
    assert all("creator=monthly-tracker-bot" in path for path in fake.requests if "/issues?" in path)


def test_a_closed_issue_is_reopened_in_the_same_update(fake: FakeGitHub) -> None:
    with client_for(fake) as client:
        publish(client)
        fake.edit_issue(TARGET, 1, state="closed")
        fake.writes.clear()
        reopened = publish(client, known_number=1)  # same content: the reopening is the only change
        fake.edit_issue(TARGET, 1, state="closed")
        fake.writes.clear()
        changed = publish(client, report(delivered=5))  # number lost, content changed: found, one PATCH
    assert (reopened.action, changed.action) == ("reopened", "reopened")
    assert [w.payload for w in fake.writes] == [
        {"body": MARKER + "\n" + report(delivered=5), "state": "open", "state_reason": "reopened"}
    ]
    issue = fake.issue(TARGET, 1)
    assert issue is not None and issue["state"] == "open" and issue["state_reason"] == "reopened"
    assert len(issues_on(fake)) == 1


def test_an_over_long_report_is_cut_at_a_theme_and_github_accepts_it(fake: FakeGitHub) -> None:
    markdown = report(delivered=60, in_progress=40, bullets=12)
    assert len(markdown) > BODY_LIMIT
    with client_for(fake) as client:
        published = publish(client, markdown)
    assert published.action == "created" and published.truncated
    issue = fake.issue(TARGET, 1)
    assert issue is not None
    body = issue["body"]
    assert github_length(body) <= BODY_LIMIT
    assert body.startswith(MARKER + "\n# " + TITLE)
    assert f"[Read the full report](<{FULL}>)" in body
    assert "## Scope and Method" in body and "## Overview" in body


# --- rate limits and failures ---------------------------------------------------------------------


def test_a_secondary_rate_limit_on_create_raises_with_retry_after_and_writes_nothing(fake: FakeGitHub) -> None:
    fake.script(
        r"/issues$",
        Scripted(403, {"retry-after": "30"}, {"message": "You have exceeded a secondary rate limit."}, method="POST"),
    )
    with client_for(fake) as client:
        with pytest.raises(RateLimited) as raised:
            publish(client)
        assert raised.value.kind == "secondary"
        assert 29 <= raised.value.retry_at - time.time() <= 31
        assert writes(fake) == [("POST", f"/repos/{TARGET}/issues")]  # tried once, not again in place
        assert issues_on(fake) == []
        assert publish(client).action == "created"  # the re-scheduled run
    assert len(issues_on(fake)) == 1


def test_a_secondary_rate_limit_on_update_leaves_the_issue_as_it_was(fake: FakeGitHub) -> None:
    with client_for(fake) as client:
        publish(client)
        fake.edit_issue(TARGET, 1, state="closed")
        before = fake.issue(TARGET, 1)
        fake.script(
            r"/issues/1$",
            Scripted(
                403, {"retry-after": "12"}, {"message": "You have exceeded a secondary rate limit."}, method="PATCH"
            ),
        )
        with pytest.raises(RateLimited) as raised:
            publish(client, report(delivered=4), known_number=1, title=TITLE + "!")
        assert 11 <= raised.value.retry_at - time.time() <= 13
        assert fake.issue(TARGET, 1) == before  # neither title, body nor state half-written
        assert publish(client, report(delivered=4), known_number=1, title=TITLE + "!").action == "reopened"


def test_a_create_that_timed_out_is_found_not_repeated(fake: FakeGitHub) -> None:
    # The fake answers late but creates the issue: GitHub may have done the create that timed out.
    fake.script(r"/issues$", Scripted(0, delay=0.6, method="POST"))
    with client_for(fake, timeout=0.2) as client:
        with pytest.raises(Unavailable):
            publish(client)
        assert fake.count(r"/issues$") == 1  # a POST is not retried in place
        deadline = time.monotonic() + 5
        while not issues_on(fake) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert publish(client).action == "unchanged"  # the next run finds it by its marker
    assert len(issues_on(fake)) == 1


def test_a_5xx_on_update_is_retried_in_place(fake: FakeGitHub) -> None:
    with client_for(fake) as client:
        publish(client)
        fake.script(r"/issues/1$", Scripted(502, method="PATCH"))
        assert publish(client, report(delivered=4), known_number=1).action == "updated"
    assert [w.method for w in fake.writes] == ["POST", "PATCH", "PATCH"]


def test_other_refusals_are_raised(fake: FakeGitHub) -> None:
    fake.script(r"/issues/7$", Scripted(403, {}, {"message": "Resource not accessible by integration"}))
    with client_for(fake) as client, pytest.raises(RequestRefused) as raised:
        publish(client, known_number=7)
    assert raised.value.status == 403
    assert fake.writes == []


def test_writes_are_spaced_a_second_apart(fake: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    """The client waits between two writes (GitHub's guidance for content-creating requests) and never
    before a read: the waits it asks for are recorded, not slept."""
    import types

    from tracker.github import client as client_module

    waits: list[float] = []
    clock = {name: getattr(time, name) for name in ("monotonic", "time", "gmtime", "strftime")}
    monkeypatch.setattr(client_module, "time", types.SimpleNamespace(**clock, sleep=waits.append))
    with client_for(fake, write_interval=0.3) as client:
        publish(client)
        assert waits == []  # the first write waits for nothing
        publish(client, report(delivered=4), known_number=1)
        assert waits and all(0 < wait <= 0.3 for wait in waits)
        asked = len(waits)
        client.issue(TARGET, 1)  # reads are not spaced
        assert len(waits) == asked


def test_bad_arguments_are_refused_before_anything_is_sent(fake: FakeGitHub) -> None:
    with client_for(fake) as client:
        for options in (
            {"title": "two\nlines"},
            {"full_report_url": "javascript:alert(1)"},
            {"full_report_url": "https://x.org/a b"},
            {"creator": "x/../user"},
        ):
            with pytest.raises(ValueError):
                publish(client, **options)
        with pytest.raises(ValueError):
            publish_issue(client, "x/../../user", SOURCE, MONTH, TITLE, report(), full_report_url=FULL)
        with pytest.raises(ValueError):
            publish_issue(client, TARGET, SOURCE, "2026-13", TITLE, report(), full_report_url=FULL)
        assert client.requests == 0


# --- the marker and the body ------------------------------------------------------------------------


def test_the_marker_line() -> None:
    assert marker(SOURCE, MONTH) == MARKER
    assert carries_marker("intro\n" + MARKER + "\r\nrest", SOURCE, MONTH)
    assert not carries_marker("quoted: " + MARKER, SOURCE, MONTH)  # a line of its own
    assert not carries_marker(MARKER, SOURCE, "2026-10")
    assert not carries_marker(MARKER, "NVIDIA/Megatron", MONTH)
    assert not carries_marker(None, SOURCE, MONTH)
    for repo, month in (("a/b -->", MONTH), (SOURCE, "2026-9"), (SOURCE, "2026-00")):
        with pytest.raises(ValueError):
            marker(repo, month)


def test_a_groups_marker_line_is_never_a_repositorys() -> None:
    group = marker("group:training", MONTH)
    assert group == "<!-- monthly-activity-tracker group=training month=2026-09 -->"
    assert carries_marker("x\n" + group, "group:Training", MONTH)  # group names in any case
    assert not carries_marker(group, "group:train", MONTH) and not carries_marker(group, "group:training", "2026-10")
    # A repository of an owner `group`, or one named like the group, is another subject, both ways.
    assert not carries_marker(group, "group/training", MONTH)
    assert not carries_marker(marker("group/training", MONTH), "group:training", MONTH)
    assert not carries_marker(marker("training/training", MONTH), "group:training", MONTH)
    for bad in ("group:", "group:a b", "group:-x", "group:a/b", "group:" + "g" * 65):
        with pytest.raises(ValueError):
            marker(bad, MONTH)


def themes_of(text: str) -> list[str]:
    """Each `### ` theme block, up to the next heading."""
    return [t.rstrip("\n") for t in re.findall(r"^### .*?(?=^##|\Z)", text, flags=re.MULTILINE | re.DOTALL)]


def test_a_report_that_fits_is_published_whole() -> None:
    markdown = report()
    assert fit_body(markdown, marker_line=MARKER, full_report_url=FULL) == MARKER + "\n" + markdown


def whole_or_shortened(kept: str, whole: str) -> bool:
    """`kept` is the theme `whole`, or its first lines and a line that counts the pull requests left
    out and links the full report."""
    if kept == whole:
        return True
    shown, cut, more = kept.rpartition("\n\n… and ")
    left_out = len(re.findall(r"#\d+\]\(https://github\.com/", whole[len(shown) :]))
    counted = f"{left_out} more pull request{'' if left_out == 1 else 's'}" if left_out else "more"
    return bool(cut) and whole.startswith(shown + "\n") and more == f"{counted} in [the full report](<{FULL}>)."


def headings_of(text: str) -> list[str]:
    return re.findall(r"^### .*$", text, flags=re.MULTILINE)


def test_a_hundred_themes_all_appear_each_shortened_to_its_share() -> None:
    markdown = report(delivered=60, in_progress=40, bullets=12)
    assert len(themes_of(markdown)) == 100 and len(markdown) > BODY_LIMIT
    body = fit_body(markdown, marker_line=MARKER, full_report_url=FULL)
    assert github_length(body) <= BODY_LIMIT
    assert body.splitlines()[0] == MARKER
    kept = themes_of(body.split("\n\n> This issue shows")[0])
    assert headings_of("\n".join(kept)) == headings_of(markdown)  # every theme, in order
    assert all(whole_or_shortened(k, w) for k, w in zip(kept, themes_of(markdown), strict=True))
    assert "> This issue shows 100 of 100 themes, the longest shortened: GitHub allows 65,536 characters" in body
    assert body.index("## Overview") < body.index("### Delivered theme 0") < body.index("> This issue shows")
    assert body.index("> This issue shows") < body.index("## Scope and Method")
    assert body.endswith("## Scope and Method\n\nThe report covers pull requests of `NVIDIA/Megatron-LM` ...\n")
    # Equal themes get equal shares, and little room is left: not another bullet's worth.
    assert len({k.count("\n- ") for k in kept}) <= 2
    assert BODY_LIMIT - github_length(body) < max(len(line) for line in markdown.splitlines())


def test_one_huge_theme_of_hostile_titles_hides_no_other_theme() -> None:
    from tracker.reports.render import markdown_text

    hostile = "@everyone ### Not a heading <!-- [click](javascript:alert(1)) `x` **#1** "
    lines = []
    for number in range(5000, 5700):  # 700 bullets of 200-character titles: several times the limit
        cite = f"[main #{number}](https://github.com/NVIDIA/Megatron-LM/pull/{number})"
        lines.append(f"- **Hostile**: {markdown_text((hostile * 3)[:200])} ({cite})")
    markdown = report(delivered=6, in_progress=3, bullets=3)
    first = "### Delivered theme 0\n\n6 pull requests in this theme.\n\n"
    markdown = markdown.replace(first, first + "\n".join(lines) + "\n", 1)
    assert len(themes_of(markdown)[0]) > BODY_LIMIT
    body = fit_body(markdown, marker_line=MARKER, full_report_url=FULL)
    assert github_length(body) <= BODY_LIMIT
    kept = themes_of(body.split("\n\n> This issue shows")[0])
    assert headings_of("\n".join(kept)) == headings_of(markdown)  # all nine themes, in order
    huge, *others = kept
    assert others == themes_of(markdown)[1:]  # the others whole
    assert huge != themes_of(markdown)[0] and whole_or_shortened(huge, themes_of(markdown)[0])
    assert re.search(r"… and \d{3} more pull requests in \[the full report\]", huge)
    assert "## Scope and Method" in body

    import cmarkgfm

    html = cmarkgfm.github_flavored_markdown_to_html(body, options=cmarkgfm.cmark.Options.CMARK_OPT_UNSAFE)
    assert html.count("<h3>") == 9 and html.count("<h2>") == 4  # no heading, link or comment of a title's
    assert 'href="javascript' not in html and "Not a heading" in html
    assert f'<a href="{FULL.replace("&", "&amp;")}">the full report</a>' in html


def test_the_body_is_within_the_limit_whatever_the_limit() -> None:
    markdown = report(delivered=6, in_progress=4, bullets=2)
    for limit in range(800, github_length(markdown) + 100):  # every limit: no off-by-one
        body = fit_body(markdown, marker_line=MARKER, full_report_url=FULL, limit=limit)
        assert github_length(body) <= limit and body.startswith(MARKER + "\n")
        kept = themes_of(body.split("\n\n> This issue shows")[0])
        whole = themes_of(markdown)[: len(kept)]  # the report's first themes, in order
        assert all(whole_or_shortened(k, w) for k, w in zip(kept, whole, strict=True))


def test_a_section_none_of_whose_themes_fit_is_left_out_with_its_heading() -> None:
    # Too small a limit for even the heading of every theme: the report's first themes that fit.
    markdown = report(delivered=40, in_progress=40, bullets=12)
    body = fit_body(markdown, marker_line=MARKER, full_report_url=FULL, limit=6_000)
    assert github_length(body) <= 6_000
    assert "## Delivered" in body and "## In Progress" not in body
    assert re.search(r"> This issue shows \d+ of 80 themes, the longest shortened", body)


def test_the_cut_renders_as_github_would() -> None:
    import cmarkgfm

    body = fit_body(report(delivered=60, in_progress=40, bullets=12), marker_line=MARKER, full_report_url=FULL)
    html = cmarkgfm.github_flavored_markdown_to_html(body, options=cmarkgfm.cmark.Options.CMARK_OPT_UNSAFE)
    assert html.startswith(MARKER)  # an HTML block of its own: GitHub shows nothing for it
    assert f'<a href="{FULL.replace("&", "&amp;")}">Read the full report</a>' in html
    assert html.count("<h3>") == len(themes_of(body))
    assert "<h2>Scope and Method</h2>" in html


def test_characters_are_counted_on_the_safe_side() -> None:
    # An astral emoji is one code point but two UTF-16 code units: counted as two.
    assert github_length("a🌈日") == 4
    markdown = report(delivered=30, in_progress=0, bullets=12, word="🌈" * 10)
    body = fit_body(markdown, marker_line=MARKER, full_report_url=FULL)
    assert len(body) < github_length(body) <= BODY_LIMIT


def test_an_overview_too_long_for_the_limit_is_cut_after_a_whole_line() -> None:
    markdown = report(delivered=2)
    body = fit_body(markdown, marker_line=MARKER, full_report_url=FULL, limit=700)
    assert github_length(body) <= 700
    assert body.startswith(MARKER + "\n# " + TITLE) and "the beginning of the report" in body
    with pytest.raises(ValueError):
        fit_body(markdown, marker_line=MARKER, full_report_url=FULL, limit=100)
