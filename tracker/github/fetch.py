"""Fetching a head's changed files from GitHub and storing them under the head they belong to.

`GET /pulls/{n}/files` answers for the PR's head *now*. A job that runs after a later push would
get the newer files, so the listing's own head is read from its `contents_url` (`?ref=<sha>`): when
it is the wanted head the files are stored; when the PR has moved on, the listing is stored under
the newer head it belongs to, and the wanted head's files come from the compare endpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tracker.core.classify import FILES_ENDPOINT_CAP, ChangedFile, Rules
from tracker.core.repository import repository_key
from tracker.github.client import BadAnswer, GitHubClient, Unavailable, typed
from tracker.store.heads import COMPARE, PULLS, DeferredHeads, HeadStore

# The compare endpoint lists at most 300 files (GitHub REST docs, "Compare two commits").
COMPARE_FILES_CAP = 300


def changed_file(item: Any) -> ChangedFile:
    """One entry of GitHub's files (or compare) listing; BadAnswer for one of another shape."""
    if not isinstance(item, dict):
        raise BadAnswer("GitHub listed a changed file that is not an object")
    return ChangedFile(
        path=typed(item, "filename", str) or "",
        status=typed(item, "status", str) or "modified",
        previous_path=typed(item, "previous_filename", str),
        additions=typed(item, "additions", int) or 0,
        deletions=typed(item, "deletions", int) or 0,
        patch=typed(item, "patch", str),
    )


def compared_files(comparison: dict[str, Any]) -> list[ChangedFile]:
    """The files of an answer of `GET /repos/{o}/{r}/compare/{base}...{head}`."""
    return [changed_file(item) for item in typed(comparison, "files", list) or []]


def listing_head(listing: Sequence[dict[str, Any]]) -> str | None:
    """The commit a files listing was made at, from its entries' `contents_url` refs."""
    refs = set()
    for item in listing:
        if item.get("status") == "removed":
            continue  # a removed file's URLs may point at the base
        url = typed(item, "contents_url", str) or ""
        ref = parse_qs(urlsplit(url).query).get("ref")
        if ref:
            refs.add(ref[0])
    if len(refs) > 1:
        raise Unavailable("the PR changed while its files were being listed")
    return refs.pop() if refs else None


def fetch_and_store(
    client: GitHubClient,
    store: HeadStore | DeferredHeads,
    full_name: str,
    number: int,
    head_sha: str,
    base_sha: str,
    rules: Rules,
    *,
    moved_on: bool = False,
) -> str:
    """Store the files of `head_sha`; `moved_on`: the ledger already shows the PR at a later head
    (`HeadStore.moved_on`), so the files listing, which answers for the PR's head now, is not asked
    and the head's files come from the compare endpoint at once."""
    repo = repository_key(full_name)
    if moved_on:
        return _store_compared(client, store, full_name, repo, number, head_sha, base_sha, rules) + (
            " (the ledger shows a later head)"
        )
    listing = client.pull_request_files(full_name, number)
    observed = listing_head(listing)
    if observed is None:  # no files, or only removed ones: ask the PR which head it is at
        head = typed(client.pull_request(full_name, number), "head", dict) or {}
        observed = typed(head, "sha", str) or ""
    files = [changed_file(item) for item in listing]
    truncated = len(listing) >= FILES_ENDPOINT_CAP
    if observed == head_sha:
        store.store(repo, number, head_sha, files, truncated=truncated, source=PULLS, rules=rules)
        return "stored"
    # Usually stored already: the listing is the PR's latest head, which its own fetch (or that of an
    # older head before this one) stored; asking costs a read, not a write transaction.
    if observed and not store.known(repo, number, observed):
        store.store(repo, number, observed, files, truncated=truncated, source=PULLS, rules=rules)
    return _store_compared(client, store, full_name, repo, number, head_sha, base_sha, rules) + (
        f" (the PR is now at {observed[:12]})"
    )


def _store_compared(
    client: GitHubClient,
    store: HeadStore | DeferredHeads,
    full_name: str,
    repo: str,
    number: int,
    head_sha: str,
    base_sha: str,
    rules: Rules,
) -> str:
    compared = compared_files(client.compare(full_name, base_sha, head_sha))
    store.store(
        repo,
        number,
        head_sha,
        compared,
        truncated=len(compared) >= COMPARE_FILES_CAP,
        source=COMPARE,
        rules=rules,
    )
    return "stored from compare"
