"""Changed files of PR heads, stored as the tracker's GitHub fetch jobs would have stored them.

A ledger that has seen N deliveries has also fetched the files of most heads they showed, and month
snapshots and rebuilds read those (tracker.store.heads). No request goes to GitHub here: each head gets the
changed files of the real Megatron-LM PR its title comes from (the shared test data, data/megatron), through
tracker.store.heads.HeadStore.store, which classifies them under the repository's rules.

Trees without tracker.store.heads (before file classification existed) get nothing, and say so.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from _stories import real_pull_requests

_STATUS = {"A": "added", "M": "modified", "D": "removed", "R": "renamed"}


class HeadsUnsupported(RuntimeError):
    pass


def store_heads(engine: Any, config: Any, full_name: str, heads: Iterable[tuple[int, str, str]]) -> int:
    """Store the files of each (number, head sha, title); how many heads were new."""
    try:
        from tracker.core.classify import ChangedFile
        from tracker.core.repository import repository_key
        from tracker.store.heads import PULLS, HeadStore
    except ImportError as exc:
        raise HeadsUnsupported(f"this tree has no head files to store ({exc})") from exc
    by_title = {pr.title: pr.files for pr in real_pull_requests()}
    store = HeadStore(engine)
    repo = repository_key(full_name)
    rules = config.rules_for(full_name)
    stored = 0
    for number, head_sha, title in heads:
        files = [
            ChangedFile(
                path=item["path"],
                status=_STATUS.get(item.get("status", "M"), "modified"),
                previous_path=item.get("old_path"),
                additions=int(item.get("added") or 0),
                deletions=int(item.get("deleted") or 0),
            )
            for item in by_title.get(title, ())
        ]
        stored += bool(store.store(repo, number, head_sha, files, truncated=False, source=PULLS, rules=rules))
    return stored
