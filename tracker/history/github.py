"""Reading a repository's history from GitHub's REST API: backfill and reconciliation.

A run covers the instants [start, end). It lists the repository's pull requests by last update,
newest first (`GET /repos/{o}/{r}/pulls?state=all&sort=updated&direction=desc`), stopping at the
first PR last updated before `start`: a PR not updated since then has no activity in the range.
Of those, a PR opened after `end`, or closed for good before `start`, cannot have activity in it
either. For each remaining PR it reads the issue timeline (`/issues/{n}/timeline`, every page),
stores the PR and its timeline as one observation with what they prove (tracker.history.derive),
and stores the files of each head a report in the range reads that is not stored yet: the PR's
current head from `GET /pulls/{n}/files`, an earlier head from `GET /compare/{base}...{head}`.

Costs: about one request per PR for the timeline, one per head still missing, and one per 100 PRs
listed. Every GET is conditional (ETags, tracker.store.http_cache), so a repeated run is mostly
304 answers, which GitHub does not count against the rate limit, and heads already stored cost
nothing. A run records each finished PR (`history_done`): after an interruption, the same run
resumes and skips them. A rate limit either waits in place (`wait`, the terminal's way) or leaves
the run `waiting` and raises, for the job to be re-scheduled at the moment GitHub gives.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from typing import Any, Protocol

from tracker.core.classify import FILES_ENDPOINT_CAP, Rules
from tracker.core.repository import check_full_name, repository_key
from tracker.core.window import month_of
from tracker.github.client import BadAnswer, GitHubClient, RateLimited, RequestRefused, Unavailable, typed
from tracker.github.fetch import COMPARE_FILES_CAP, changed_file, compared_files, listing_head
from tracker.history.derive import IncompleteBody, MalformedBody, derive_history, observation_document, observation_id
from tracker.history.store import DONE, FAILED, RUNNING, WAITING, HistoryStore, Run
from tracker.store.heads import COMPARE, PULLS, UNAVAILABLE, HeadStore

RECORDED, UNCHANGED, GONE = "recorded", "unchanged", "gone"
# Pages of 100 pull requests a run lists at most (GitHub documents no limit): 50,000 PRs updated in
# the range, some years of the busiest repositories; past it, the run fails and says so.
PULL_LIST_PAGES = 500
# The timeline events a history reads; the others (comments, reviews, mentions, ...) are not kept.
_EVENTS = frozenset(
    {
        "committed",
        "head_ref_force_pushed",
        "closed",
        "reopened",
        "merged",
        "renamed",
        "labeled",
        "unlabeled",
        "ready_for_review",
        "convert_to_draft",
    }
)


class Progress(Protocol):
    def total(self, count: int) -> None: ...

    def advance(self, number: int, outcome: str) -> None: ...

    def waiting(self, until: float, kind: str) -> None: ...


class _Silent:
    def total(self, count: int) -> None:
        pass

    def advance(self, number: int, outcome: str) -> None:
        pass

    def waiting(self, until: float, kind: str) -> None:
        pass


DAILY, END = "daily", "end"


@dataclass(frozen=True)
class Target:
    full_name: str
    start: int  # epoch seconds
    end: int
    timezone_for: Callable[[str], str]
    rules: Rules
    # Which heads' files the run fetches itself: DAILY, each head a PR had at the end of a day of the
    # range (every cutoff's report is complete at once); END, only the head at the range's end (the
    # final and current reports'), leaving the others to the regular head fetcher in the background
    # (they are wanted heads: the sweep queues them), about one request per PR fewer here.
    files: str = DAILY


def read_history(
    client: GitHubClient,
    history: HistoryStore,
    heads: HeadStore,
    target: Target,
    kind: str,
    *,
    progress: Progress | None = None,
    wait: Callable[[RateLimited], None] | None = None,
) -> Run:
    """Run (or resume) the `kind` run (backfill, reconciliation) of `target`; the finished run.
    Without `wait`, a rate limit leaves the run `waiting` and is raised."""
    full_name = check_full_name(target.full_name)
    progress = progress or _Silent()
    run = history.open_run(kind, full_name, target.start, target.end)
    # A resumed run reads up to the later of its ends (a range that ends now has moved on).
    target = replace(target, end=run.range_end)
    requests_before, not_modified_before = client.requests, client.not_modified

    def account() -> None:
        nonlocal requests_before, not_modified_before
        history.update_run(
            run.id,
            requests=client.requests - requests_before,
            not_modified=client.not_modified - not_modified_before,
        )
        requests_before, not_modified_before = client.requests, client.not_modified

    def patiently(step: Callable[[], Any]) -> Any:
        while True:
            try:
                return step()
            except RateLimited as exc:
                account()
                history.update_run(run.id, state=WAITING, detail=f"{exc}")
                if wait is None:
                    raise
                progress.waiting(exc.retry_at, exc.kind)
                wait(exc)
                history.update_run(run.id, state=RUNNING, detail=None)

    try:
        candidates = patiently(lambda: list(_candidates(client, full_name, target.start, target.end)))
        finished = history.finished_numbers(run.id)
        history.update_run(run.id, total=len(candidates))
        progress.total(len(candidates))
        for _ in finished & {pr["number"] for pr in candidates}:
            progress.advance(0, "resumed")
        for pr in candidates:
            number = pr["number"]
            if number in finished:
                continue
            outcome: str = patiently(partial(_one, client, history, heads, target, kind, pr))
            history.finish_pull_request(run.id, number, outcome)
            account()
            progress.advance(number, outcome)
    except RateLimited:
        raise
    except Exception as exc:
        account()
        history.update_run(run.id, state=FAILED, detail=f"{type(exc).__name__}: {exc}"[:500])
        raise
    account()
    gone = sorted(n for n, outcome in history.outcomes(run.id).items() if outcome == GONE)
    detail = f"deleted on GitHub: {', '.join(f'#{n}' for n in gone)}" if gone else None
    tz = target.timezone_for(full_name)
    months = (month_of(target.start, tz), month_of(target.end - 1, tz))
    history.add_coverage(full_name, kind, target.start, target.end, months)
    history.update_run(run.id, state=DONE, detail=detail)
    done = history.run(run.id)
    assert done is not None
    return done


def wait_for(exc: RateLimited) -> None:
    """The terminal's way with a rate limit: sleep until GitHub allows the next request."""
    time.sleep(max(0.0, exc.retry_at - time.time()))


def _candidates(client: GitHubClient, full_name: str, start: int, end: int) -> Iterator[dict[str, Any]]:
    params = {"state": "all", "sort": "updated", "direction": "desc", "per_page": 100}
    for page in client.pages(f"/repos/{full_name}/pulls", params, max_pages=PULL_LIST_PAGES):
        for pr in page:
            updated = _time(pr, "updated_at")
            if updated is not None and updated < start:
                return
            created, closed = _time(pr, "created_at"), _time(pr, "closed_at")
            if created is None or created >= end:
                continue
            if typed(pr, "state", str) == "closed" and closed is not None and closed < start:
                continue
            number = typed(pr, "number", int)
            if number is not None and number > 0:
                yield _kept_pull(pr)  # the candidates are held until the run ends: only what it reads


def _one(
    client: GitHubClient, history: HistoryStore, heads: HeadStore, target: Target, kind: str, pr: dict[str, Any]
) -> str:
    full_name, number = target.full_name, int(pr["number"])
    try:
        timeline = [
            _kept_event(item)
            for page in client.pages(f"/repos/{full_name}/issues/{number}/timeline", {"per_page": 100})
            for item in page
            if isinstance(item, dict) and item.get("event") in _EVENTS
        ]
    except RequestRefused as exc:
        if exc.status in (404, 410):
            return GONE  # deleted (or transferred away) since it was listed
        raise
    document = observation_document(full_name, (target.start, target.end), _kept_pull(pr), timeline)
    oid = observation_id(kind, full_name, number, document)
    try:
        found = derive_history(oid, document, target.timezone_for)
    except (MalformedBody, IncompleteBody) as exc:  # a field of the PR or its timeline of the wrong type
        raise BadAnswer(f"GitHub's answer for {full_name}#{number} is not what its API documents: {exc}") from exc
    recorded = history.record(oid, kind, full_name, number, document, found)
    repo = repository_key(full_name)
    current = str((pr.get("head") or {}).get("sha") or "").lower()
    for head_sha, base_sha in found.heads if target.files == DAILY else found.heads[-1:]:
        if not heads.known(repo, number, head_sha):
            _store_files(client, heads, target, number, head_sha, base_sha, current)
    return RECORDED if recorded else UNCHANGED


def _store_files(
    client: GitHubClient,
    heads: HeadStore,
    target: Target,
    number: int,
    head_sha: str,
    base_sha: str,
    current: str,
) -> None:
    repo = repository_key(target.full_name)
    try:
        if head_sha == current:
            listing = client.pull_request_files(target.full_name, number)
            observed = listing_head(listing) or current
            files = [changed_file(item) for item in listing]
            truncated = len(listing) >= FILES_ENDPOINT_CAP
            heads.store(repo, number, observed, files, truncated=truncated, source=PULLS, rules=target.rules)
            if observed == head_sha:
                return
        if not base_sha:
            raise RequestRefused(422, "compare", "the PR's base commit is unknown")
        compared = compared_files(client.compare(target.full_name, base_sha, head_sha))
        truncated = len(compared) >= COMPARE_FILES_CAP
        heads.store(repo, number, head_sha, compared, truncated=truncated, source=COMPARE, rules=target.rules)
    except RequestRefused as exc:
        if exc.status not in (404, 410, 422):
            raise
        heads.store(repo, number, head_sha, [], truncated=False, source=UNAVAILABLE, rules=target.rules)
    except Unavailable:
        pass  # left wanted: the sweep fetches it later (tracker.store.heads.HeadStore.missing)


def _time(item: dict[str, Any], name: str) -> int | None:
    """The instant of a time field GitHub gave (None when null or absent); BadAnswer for one that is not."""
    value = typed(item, name, str)
    instant = _instant(value)
    if value is not None and instant is None:
        raise BadAnswer(f"GitHub's answer has {name!r} as {value[:40]!r}, not a time")
    return instant


def _instant(value: Any) -> int | None:
    if not isinstance(value, str):
        return None
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return None


def _kept_pull(pr: dict[str, Any]) -> dict[str, Any]:
    """The fields of a PR a history reads (a listed PR is ~20 KB, mostly URLs and repositories). A
    field of the wrong type is kept as it came, for `derive_history` to refuse."""
    user, base, head = (pr.get(name) or {} for name in ("user", "base", "head"))
    labels = pr.get("labels") or []
    return {
        "number": pr.get("number"),
        "title": pr.get("title"),
        "body": pr.get("body"),
        "state": pr.get("state"),
        "draft": pr.get("draft"),
        "created_at": pr.get("created_at"),
        "updated_at": pr.get("updated_at"),
        "closed_at": pr.get("closed_at"),
        "merged_at": pr.get("merged_at"),
        "html_url": pr.get("html_url"),
        "user": {"login": user.get("login")} if isinstance(user, dict) else user,
        "base": {"ref": base.get("ref"), "sha": base.get("sha")} if isinstance(base, dict) else base,
        "head": {"ref": head.get("ref"), "sha": head.get("sha")} if isinstance(head, dict) else head,
        "labels": [{"name": label.get("name")} if isinstance(label, dict) else label for label in labels]
        if isinstance(labels, list)
        else labels,
    }


def _kept_event(item: dict[str, Any]) -> dict[str, Any]:
    """The fields of a timeline event a history reads; one of the wrong type is kept as it came, for
    `derive_history` to refuse."""
    kept = {name: item[name] for name in ("event", "created_at", "sha", "commit_id") if item.get(name) is not None}
    for name in ("committer", "author"):
        signature = item.get(name)
        if isinstance(signature, dict) and signature.get("date"):
            kept[name] = {"date": signature["date"]}
        elif signature is not None and not isinstance(signature, dict):
            kept[name] = signature
    label = item.get("label")
    if label is not None:
        kept["label"] = {"name": label.get("name", "")} if isinstance(label, dict) else label
    rename = item.get("rename")
    if isinstance(rename, dict):
        kept["rename"] = {"from": rename.get("from", ""), "to": rename.get("to", "")}
    elif rename is not None:
        kept["rename"] = rename
    return kept


# --- redelivery of what the hook failed to deliver ----------------------------------------------------


def redeliver_failed(
    client: GitHubClient, full_name: str, hook_id: int, since: int, stored: Callable[[str], bool]
) -> list[str]:
    """Ask GitHub to redeliver each delivery of the hook since `since` that never arrived: no attempt
    of it answered 2xx, and the ledger does not hold its id (`stored`). GitHub sends it again under
    its original X-GitHub-Delivery id, so what the tracker already has stays one delivery. Returns
    the ids asked for. Needs a token that may administer the repository's hooks."""
    full_name = check_full_name(full_name)
    if isinstance(hook_id, bool) or not isinstance(hook_id, int) or hook_id < 1:
        raise ValueError(f"not a hook id: {hook_id!r}")
    path = f"/repos/{full_name}/hooks/{hook_id}/deliveries"
    attempts: dict[str, list[dict[str, Any]]] = {}
    for page in client.pages(path, {"per_page": 100}):
        older = False
        for item in page:
            if not isinstance(item, dict) or not isinstance(item.get("guid"), str):
                continue
            delivered = _time(item, "delivered_at")
            if delivered is not None and delivered < since:
                older = True
                continue
            attempts.setdefault(item["guid"], []).append(item)
        if older:
            break  # newest first: the rest is older still
    asked = []
    for guid, tries in attempts.items():
        if any(200 <= (typed(t, "status_code", int) or 0) < 300 for t in tries) or stored(guid):
            continue
        latest = max(tries, key=lambda t: (typed(t, "delivered_at", str) or "", typed(t, "id", int) or 0))
        delivery_id = typed(latest, "id", int)
        if delivery_id is None or delivery_id < 1:
            continue
        client.post(f"{path}/{delivery_id}/attempts", {})
        asked.append(guid)
    return asked
