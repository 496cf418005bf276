"""Change groups: the same change landed on several branches (dev/main twins), described once. Pure.

Signals seen in real Megatron-LM data (merged PRs of March-June 2026):
- normalised titles: `[dev]`-style tags, a `cp:` prefix, `(#N)`, `(cherry-pick #N)` and
  "into `branch`" removed; equal normalised titles on *different* base branches are one change
  (two unrelated PRs with the same title on the same branch stay apart);
- explicit references with a cue: "cherry-pick #N", "cp #N", "port of #N", "mirror of #N",
  "counterpart #N", "Copy to main ... #N". A cue in the title counts as it is; a cue in the body
  only when the two PRs also share a similar title or a changed file: anyone who opens a PR writes
  its body, and a sentence there alone must not tie an unrelated PR to someone else's change;
- identical non-empty file sets on different base branches (of three or more files, or with
  similar titles).
Groups are transitive (union-find) and ordered by their smallest PR number.

Titles and bodies come from any PR author, so every function here takes time linear in its input:
titles are cut to `MAX_TITLE` and bodies to `MAX_BODY` characters before any pattern sees them, the
patterns cannot backtrack over a run of characters more than once (possessive quantifiers, anchored
matches, plain string methods where no pattern is needed), and `change_groups` joins each set of
PRs that share a title or a file set in one pass instead of comparing every pair.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from tracker.core import memo

# GitHub keeps a title to 256 characters and refuses a body over 65,536: nothing typed into GitHub is
# longer, and cutting there keeps the work on a forged or corrupted delivery bounded.
MAX_TITLE = 1024
MAX_BODY = 65_536

# `[dev]`, `[Main][feat]`, `[MXFP8/FP4-param-gather]`: tags at the start of a title (the ones at the end
# are taken off by `_without_trailing_tags`, scanning back from the end, which a pattern cannot do).
_LEADING_TAGS = re.compile(r"(?:\s*+\[[^\[\]]{1,40}\])+")
_MAX_TAG = 40
_CP_PREFIX = re.compile(r"\s*+(?:cp|cherry[- ]?pick|backport|port)\s*+[:\-]\s*+", re.IGNORECASE)
_PR_REFERENCE = re.compile(
    r"\(\s*+(?:(?:cherry[- ]?pick(?:ed)?|cp|backport|port)(?:\s++of)?\s*+)?#\d++\s*+\)", re.IGNORECASE
)
# What may follow a removed "(#N)" with no space before it: closing quotes and brackets, punctuation.
_CLOSING = frozenset("\"'`)]}”’»」』.,;:!?")
_DEV_OR_MAIN = re.compile(r"\((?:dev|main)\)", re.IGNORECASE)
# "into `branch`": any branch-shaped word in backticks (`cp: ... into \`core_r0.17.0\``). Without
# backticks only the base branches of the real data (main 1,044 PRs, dev 194, core_r0.17.0 / 0.18.0 /
# 0.19.0 50): "Sync main into dev" (#4031) names one, "Move MIMO unit tests into models/mimo" (#5063),
# "Wire --rl-inference-parsers into MRL" (#4768) and "Refactor TE fused ops integration into mixin"
# (#4630) do not.
_BRANCH_WORD = re.compile(r"[\w./-]+")
_KNOWN_BRANCH = re.compile(r"main|dev|core_r\d+(?:\.\d+)*", re.IGNORECASE)
# A cue, then at most 60 characters on its line without a `#`, then `#N` or `/pull/N`. A cue is at most
# `_MAX_CUE` characters long ("copy" + 8 spaces + "to" + 8 spaces + "main"), so a match starts at most
# `_REACH` characters before the `#N` or `/pull/N` it ends with.
_CUED_REFERENCE = re.compile(
    r"\b(?:cherry[- ]?pick(?:ed)?(?:\s{1,8}+(?:of|from))?|cp|back[- ]?port(?:ed)?(?:\s{1,8}+of)?"
    r"|port(?:ed)?(?:\s{1,8}+(?:of|from))?|mirror(?:ed|s)?(?:\s{1,8}+of)?|counterpart(?:\s{1,8}+of)?"
    r"|copy\s{1,8}+to\s{1,8}+main)\b[^#\n]{0,60}?(?:#|/pull/)(\d++)",
    re.IGNORECASE,
)
_MAX_CUE = 26
# A PR number has at most this many digits (GitHub's fit in 63 bits). A longer run is not one, and
# Python refuses to convert more than 4,300 digits: a body of `cp #` and 5,000 digits failed every report.
_MAX_NUMBER_DIGITS = 19
_REACH = 60 + _MAX_CUE + 1  # and the character before the cue, for its `\b`
# `#N` or `/pull/N` marks, chained while each is within `_REACH` of the previous one: the stretches of a
# text where a cued reference can end. Searching for cues only there keeps a text of cue words with no
# number nearby ("cp cp cp ...") from costing a 60-character scan per word.
_MARKS = re.compile(rf"(?:#|/pull/)\d++(?:[\s\S]{{0,{_REACH}}}?(?:#|/pull/)\d++)*+")
_CP_NUMBER = re.compile(r"\(#?(\d{2,}+)\)")
# A title this short or shorter says too little to tie two PRs together ("Fix typo").
_MIN_TITLE = 12


@dataclass(frozen=True)
class GroupInput:
    number: int
    title: str
    body: str
    base_ref: str
    files: frozenset[str]


@lru_cache(maxsize=16_384)
def normalise_title(title: str) -> str:
    """The title compared between branches: `display_title`, without quotes, in lower case."""
    offered = memo.known("normalise_title", title)
    if offered is not memo.MISSING:
        return str(offered)
    text = display_title(title).replace("`", " ").replace('"', " ")
    return " ".join(text.split()).strip(" .:-").lower()


@lru_cache(maxsize=16_384)  # every report of a month cleans the same titles again
def display_title(title: str) -> str:
    """A title as a report names the change: tags, `cp:`, `(#N)` and "into `branch`" removed."""
    offered = memo.known("display_title", title)
    if offered is not memo.MISSING:
        return str(offered)
    title = title[:MAX_TITLE]
    text = _without_trailing_tags(_without_leading_tags(title)).strip()
    prefix = _CP_PREFIX.match(text)
    if prefix:
        text = text[prefix.end() :]
    text = _without_references(text)
    text = _without_into_branch(text)
    text = _DEV_OR_MAIN.sub(" ", text).strip()
    if text.startswith("`") and text.endswith("`") and text.count("`") == 2:
        text = text[1:-1]
    text = " ".join(text.split()).strip(" .:-")
    return text or title.strip()


def references(title: str, body: str = "") -> frozenset[int]:
    """PR numbers a title or body names with a cue (cherry-pick, cp, port, mirror, counterpart, copy).
    A `cp:` title's own parenthesised number counts too: "cp: `Fix x (4089)` into `dev`"."""
    return title_references(title) | body_references(body)


@lru_cache(maxsize=16_384)  # every report of a month reads the same titles and bodies again
def title_references(title: str) -> frozenset[int]:
    """The PR numbers a title names with a cue, and a `cp:` title's parenthesised number."""
    title = title[:MAX_TITLE]
    found = _cued(title)
    if _CP_PREFIX.match(title):
        found |= {int(number) for number in _CP_NUMBER.findall(title)}
    return frozenset(found)


@lru_cache(maxsize=16_384)
def body_references(body: str) -> frozenset[int]:
    """The PR numbers a body names with a cue."""
    offered = memo.known("body_references", body)
    if offered is not memo.MISSING:
        return frozenset(offered)
    return frozenset(_cued(body[:MAX_BODY]))


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

    by_number = {pr.number: pr for pr in prs}
    titles = {pr.number: normalise_title(pr.title) for pr in prs}
    by_title: dict[str, list[GroupInput]] = defaultdict(list)
    by_files: dict[frozenset[str], list[GroupInput]] = defaultdict(list)
    for pr in prs:
        title = titles[pr.number]
        if len(title) >= _MIN_TITLE:
            by_title[title].append(pr)
        if pr.files:
            by_files[pr.files].append(pr)
        for number in title_references(pr.title):
            if number in parent and number != pr.number:
                join(pr.number, number)
        for number in body_references(pr.body):
            if number in parent and number != pr.number:
                named = by_number[number]
                if pr.files & named.files or _similar(titles[pr.number], titles[number]):
                    join(pr.number, number)
    for bucket in by_title.values():
        _join_across_branches(bucket, join)
    # The same files on two branches is the same change only when that says something: several
    # files, or a similar title (one-file PRs touching arguments.py are everywhere).
    for files, bucket in by_files.items():
        if len(files) >= 3:
            _join_across_branches(bucket, join)
        else:
            _join_similar_across_branches(bucket, titles, join)
    members: dict[int, list[int]] = defaultdict(list)
    for pr in prs:
        members[find(pr.number)].append(pr.number)
    return sorted((tuple(sorted(group)) for group in members.values()), key=lambda group: group[0])


def _without_leading_tags(title: str) -> str:
    tags = _LEADING_TAGS.match(title)
    return " " + title[tags.end() :] if tags else title


def _without_trailing_tags(text: str) -> str:
    """`Fix it [dev] [bug]` → `Fix it `: tags taken off from the end, each found by its `[` (a tag holds
    no bracket, so the last `[` before a closing `]` starts it), whitespace between them skipped."""
    end = len(text)
    cut = None
    while end and text[end - 1].isspace():
        end -= 1
    while end and text[end - 1] == "]":
        start = text.rfind("[", max(0, end - 2 - _MAX_TAG), end - 1)
        if start == -1 or start == end - 2 or "]" in text[start + 1 : end - 1]:
            break
        cut = end = start
        while end and text[end - 1].isspace():
            end -= 1
    return text if cut is None else text[:cut] + " "


def _without_references(text: str) -> str:
    """`(#N)` and `(cherry-pick #N)` removed; one space in their place, none before a closing quote,
    bracket or punctuation (`Revert "Fix it (#5170)"` → `Revert "Fix it"`)."""
    pieces: list[str] = []
    last = 0
    for match in _PR_REFERENCE.finditer(text):
        pieces.append(text[last : match.start()])
        last = match.end()
        following = text[last : last + 1]
        if following and following not in _CLOSING:
            pieces.append(" ")
            continue
        while pieces and (not pieces[-1] or pieces[-1].isspace()):
            pieces.pop()
        if pieces:
            pieces[-1] = pieces[-1].rstrip()
    pieces.append(text[last:])
    return "".join(pieces)


def _without_into_branch(text: str) -> str:
    words = text.rsplit(None, 2)
    if len(words) < 3 or words[1].lower() != "into":
        return text
    target = words[2]
    quoted = len(target) > 2 and target[0] == target[-1] == "`" and _BRANCH_WORD.fullmatch(target[1:-1])
    return words[0] if quoted or _KNOWN_BRANCH.fullmatch(target) else text


def _cued(text: str) -> set[int]:
    """The numbers of `_CUED_REFERENCE` in `text`, as a search of the whole text finds them: every match
    lies in the stretch of marks it ends in (it starts at most `_REACH` before its mark), and stretches
    are `_REACH` apart, so searching each stretch from `_REACH` before it finds the same matches."""
    found: set[int] = set()
    for marks in _MARKS.finditer(text):
        start = max(0, marks.start() - _REACH)
        found.update(
            int(digits)
            for match in _CUED_REFERENCE.finditer(text, start, marks.end())
            if len(digits := match.group(1)) <= _MAX_NUMBER_DIGITS
        )
    return found


def _similar(first: str, second: str) -> bool:
    return _similar_words(frozenset(first.split()), frozenset(second.split()))


def _similar_words(a: frozenset[str], b: frozenset[str]) -> bool:
    return bool(a and b) and len(a & b) / len(a | b) >= 0.5


def _join_across_branches(bucket: Sequence[GroupInput], join: Callable[[int, int], None]) -> None:
    """Join the PRs of a bucket where every pair on different branches belongs together. With two or
    more branches that graph is connected, so each PR joins the first PR on a branch other than its
    own: one pass instead of every pair."""
    first = bucket[0]
    other = next((pr for pr in bucket if pr.base_ref != first.base_ref), None)
    if other is None:
        return
    for pr in bucket:
        join(pr.number, first.number if pr.base_ref != first.base_ref else other.number)


def _join_similar_across_branches(
    bucket: Sequence[GroupInput], titles: dict[int, str], join: Callable[[int, int], None]
) -> None:
    """Join the PRs of one small file set whose titles are similar, on different branches. Similarity
    depends only on a title's set of words, so PRs with one word set form a class: a class is similar
    to itself, so a class on two branches is one change; two similar classes are one change unless
    both sit on one and the same branch, and then every member of both is (each has a partner on
    another branch). Only distinct word sets are compared pairwise, and only those whose sizes allow
    half of their words to be shared."""
    classes: dict[frozenset[str], list[GroupInput]] = defaultdict(list)
    for pr in bucket:
        words = frozenset(titles[pr.number].split())
        if words:  # a title without words is similar to nothing
            classes[words].append(pr)
    keyed = sorted(
        ((words, members, frozenset(pr.base_ref for pr in members)) for words, members in classes.items()),
        key=lambda entry: len(entry[0]),
    )
    linked: set[int] = set()

    def link(index: int) -> None:
        if index not in linked:
            linked.add(index)
            members = keyed[index][1]
            for pr in members[1:]:
                join(pr.number, members[0].number)

    for index, (_, _, branches) in enumerate(keyed):
        if len(branches) > 1:
            link(index)
    for i, (words_a, members_a, branches_a) in enumerate(keyed):
        for j in range(i + 1, len(keyed)):
            words_b, members_b, branches_b = keyed[j]
            if len(words_b) > 2 * len(words_a):
                break  # sorted by size: the rest are larger still, and share less than half
            if len(branches_a) == 1 and branches_a == branches_b:
                continue
            if _similar_words(words_a, words_b):
                link(i)
                link(j)
                join(members_a[0].number, members_b[0].number)
