"""Change groups: the same change landed on several branches (dev/main twins), described once. Pure.

Signals seen in real Megatron-LM data (../shared/data/megatron/README.md):
- normalised titles: `[dev]`-style tags, a `cp:` prefix, `(#N)`, `(cherry-pick #N)` and
  "into `branch`" removed; equal normalised titles on *different* base branches are one change
  (two unrelated PRs with the same title on the same branch stay apart);
- explicit references with a cue: "cherry-pick #N", "cp #N", "port of #N", "mirror of #N",
  "counterpart #N", "Copy to main ... #N";
- identical non-empty file sets on different base branches (of three or more files, or with
  similar titles).
Groups are transitive (union-find) and ordered by their smallest PR number.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

# `[dev]`, `[Main][feat]`, `[MXFP8/FP4-param-gather]`: tags at the start or the end of a title.
_TAG = re.compile(r"^(?:\s*\[[^\[\]]{1,40}\])+|(?:\[[^\[\]]{1,40}\]\s*)+$")
_CP_PREFIX = re.compile(r"^\s*(cp|cherry[- ]?pick|backport|port)\s*[:\-]\s*", re.IGNORECASE)
_PR_REFERENCE = re.compile(
    r"\(\s*(?:(?:cherry[- ]?pick(?:ed)?|cp|backport|port)(?:\s+of)?\s*)?#\d+\s*\)", re.IGNORECASE
)
_INTO_BRANCH = re.compile(r"\s+into\s+`?[\w./-]+`?\s*$", re.IGNORECASE)
_CUED_REFERENCE = re.compile(
    r"\b(?:cherry[- ]?pick(?:ed)?(?:\s+(?:of|from))?|cp|back[- ]?port(?:ed)?(?:\s+of)?|port(?:ed)?(?:\s+(?:of|from))?"
    r"|mirror(?:ed|s)?(?:\s+of)?|counterpart(?:\s+of)?|copy\s+to\s+main)\b[^#\n]{0,60}?"
    r"(?:#|/pull/)(\d+)",
    re.IGNORECASE,
)
# A title this short or shorter says too little to tie two PRs together ("Fix typo").
_MIN_TITLE = 12


@dataclass(frozen=True)
class GroupInput:
    number: int
    title: str
    body: str
    base_ref: str
    files: frozenset[str]


def normalise_title(title: str) -> str:
    """The title compared between branches: `display_title`, without quotes, in lower case."""
    text = display_title(title).replace("`", " ").replace('"', " ")
    return re.sub(r"\s+", " ", text).strip(" .:-").lower()


def display_title(title: str) -> str:
    """A title as a report names the change: tags, `cp:`, `(#N)` and "into `branch`" removed."""
    text = _TAG.sub(" ", title)
    text = _CP_PREFIX.sub("", text.strip())
    text = _PR_REFERENCE.sub(" ", text)
    text = _INTO_BRANCH.sub("", text)
    text = re.sub(r"\((?:dev|main)\)", " ", text, flags=re.IGNORECASE).strip()
    if text.startswith("`") and text.endswith("`") and text.count("`") == 2:
        text = text[1:-1]
    text = re.sub(r"\s+", " ", text).strip(" .:-")
    return text or title.strip()


def references(title: str, body: str = "") -> set[int]:
    """PR numbers a title or body names with a cue (cherry-pick, cp, port, mirror, counterpart, copy).
    A `cp:` title's own parenthesised number counts too: "cp: `Fix x (4089)` into `dev`"."""
    found = {int(match.group(1)) for match in _CUED_REFERENCE.finditer(f"{title}\n{body}")}
    if _CP_PREFIX.match(title):
        found |= {int(number) for number in re.findall(r"\(#?(\d{2,})\)", title)}
    return found


def _similar(first: str, second: str) -> bool:
    a, b = set(first.split()), set(second.split())
    return bool(a and b) and len(a & b) / len(a | b) >= 0.5


def change_groups(prs: Sequence[GroupInput]) -> list[tuple[int, ...]]:
    """Every PR in exactly one group; each group's numbers sorted; groups by smallest number."""
    parent = {pr.number: pr.number for pr in prs}

    def find(number: int) -> int:
        while parent[number] != number:
            parent[number] = parent[parent[number]]
            number = parent[number]
        return number

    def join(a: int, b: int) -> None:
        root_a, root_b = find(a), find(b)
        if root_a != root_b:
            parent[max(root_a, root_b)] = min(root_a, root_b)

    by_title: dict[str, list[GroupInput]] = defaultdict(list)
    by_files: dict[frozenset[str], list[GroupInput]] = defaultdict(list)
    for pr in prs:
        title = normalise_title(pr.title)
        if len(title) >= _MIN_TITLE:
            by_title[title].append(pr)
        if pr.files:
            by_files[pr.files].append(pr)
        for number in references(pr.title, pr.body):
            if number in parent and number != pr.number:
                join(pr.number, number)
    for bucket in by_title.values():
        for i, first in enumerate(bucket):
            for second in bucket[i + 1 :]:
                if first.base_ref != second.base_ref:
                    join(first.number, second.number)
    # The same files on two branches is the same change only when that says something: several
    # files, or a similar title (one-file PRs touching arguments.py are everywhere).
    for bucket in by_files.values():
        for i, first in enumerate(bucket):
            for second in bucket[i + 1 :]:
                if first.base_ref != second.base_ref and (
                    len(first.files) >= 3 or _similar(normalise_title(first.title), normalise_title(second.title))
                ):
                    join(first.number, second.number)
    members: dict[int, list[int]] = defaultdict(list)
    for pr in prs:
        members[find(pr.number)].append(pr.number)
    return sorted((tuple(sorted(group)) for group in members.values()), key=lambda group: group[0])
