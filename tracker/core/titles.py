"""Titles as a reader sees them, and the terms a title is about. Pure.

`clean_title` is how a report names a change: on top of `tracker.core.groups.display_title` (tags such as
`[dev]`, `cp:`, a trailing `(#N)` and "into `branch`" removed) it takes off a conventional-commit prefix
(`fix(fsdp):`, `chore:`, `Perf:`), ticket ids (`AUT-1142`), and capitalises the first letter when the
first word is a plain lower-case word (`mHC`, `vLLM` and `cuDNN` keep their spelling).

`title_terms` is what a title is about, for grouping and naming: its words less the ones every title has
("fix", "add", "support", ...), each with the spelling the author used, keyed in lower case without a
plural `s`. A term is *named* when it looks like a name (an acronym, a capital or a digit inside the
word: `GTP`, `MFSDP`, `DeepSeek-V4`, `mHC`), which is what a month's stories are usually about.

Every function takes time linear in its input: the title is cut to `MAX_TITLE` first, and the patterns
are anchored or cannot backtrack over a run of characters more than once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from tracker.core import memo
from tracker.core.groups import MAX_TITLE, display_title
from tracker.core.themes import spelling

# Conventional-commit types (and the few other words teams put in that place): `fix:`, `feat(moe)!:`.
_TYPES = (
    "fix|fixes|bugfix|hotfix|feat|feature|chore|docs|doc|refactor|perf|test|tests|ci|build|style|deps"
    "|dep|misc|infra|cleanup|wip"
)
# `revert: x` undoes x: it is kept as a revert of x, not read as x.
_REVERT = re.compile(r"^\s*+revert(?:\([^()]{0,40}\))?!?\s*+:\s*+", re.IGNORECASE)
_CONVENTIONAL = re.compile(rf"^\s*+(?:{_TYPES})(?:\([^()]{{0,40}}\))?!?\s*+:\s*+", re.IGNORECASE)
# Any word with a scope, `moe(perf):` or `fix(gtp+dcp):`, is a conventional-commit prefix as well.
_SCOPED = re.compile(r"^\s*+(?!revert\b)[A-Za-z][\w-]{0,20}\([^()]{0,40}\)!?\s*+:\s*+", re.IGNORECASE)
# `AUT-1142 bump x`, `[JIRA-12345]`: capitals, a dash and at least three digits, at the start of the title or
# in brackets (`GPT-3` and `H100` are no tickets, and `SHA-256` in a sentence is a name).
_TICKET = re.compile(r"\[[A-Z]{2,10}-\d{3,8}\]:?|^\s*+[A-Z]{2,10}-\d{3,8}\b:?")
# For what a title is about, a ticket id anywhere is noise (`fix(fsdp): AUT-1323 use ...`).
_ANY_TICKET = re.compile(r"\b[A-Z]{2,10}-\d{3,8}\b")
_EMPTY_BRACKETS = re.compile(r"\[\s*\]|\(\s*\)")
# A first word of plain lower-case letters (`add`, `rl:`), not a name or a file (`mHC`, `pretrain_x.py`).
_LOWER_WORD = re.compile(r"[a-z]+(?:-[a-z]+)*+(?=[:,;]?(?:\s|$))")


@lru_cache(maxsize=16_384)  # every report of a month cleans the same titles again
def clean_title(title: str) -> str:
    """A PR title as a report's bullet names the change."""
    offered = memo.known("clean_title", title)
    if offered is not memo.MISSING:
        return str(offered)
    text = display_title(title[:MAX_TITLE])
    revert = _REVERT.match(text)
    if revert:
        return f"Revert: {clean_title(text[revert.end() :])}"
    for _ in range(3):  # `[dev] fix(deps): AUT-1323 chore: ...`: prefixes can follow one another
        before = text
        text = _CONVENTIONAL.sub("", text, count=1)
        text = _SCOPED.sub("", text, count=1)
        text = _TICKET.sub(" ", text)
        text = display_title(_EMPTY_BRACKETS.sub(" ", text))
        if text == before:
            break
    text = " ".join(text.split()).strip(" .;:-")
    if not text:
        return display_title(title[:MAX_TITLE])
    first = _LOWER_WORD.match(text)
    if first:
        word = first.group(0)
        text = spelling(word) + text[len(word) :] if spelling(word) != word.capitalize() else text[0].upper() + text[1:]
    return text


# Words every title has: what was done, not what it was done to.
STOP_WORDS = frozenset(  # noqa: SIM905 (a list of 200 quoted words would be harder to read)
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "on",
        "for",
        "and",
        "or",
        "with",
        "without",
        "from",
        "by",
        "into",
        "via",
        "when",
        "while",
        "as",
        "at",
        "is",
        "are",
        "be",
        "been",
        "not",
        "no",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "than",
        "then",
        "so",
        "if",
        "but",
        "do",
        "does",
        "after",
        "before",
        "over",
        "under",
        "up",
        "out",
        "off",
        "across",
        "between",
        "within",
        "per",
        "all",
        "any",
        "some",
        "more",
        "less",
        "most",
        "only",
        "also",
        "new",
        "old",
        "other",
        "own",
        "same",
        "both",
        "each",
        "via",
        "vs",
        "fix",
        "fixes",
        "fixed",
        "fixing",
        "add",
        "adds",
        "added",
        "adding",
        "support",
        "supports",
        "supported",
        "supporting",
        "update",
        "updates",
        "updated",
        "updating",
        "remove",
        "removes",
        "removed",
        "removing",
        "use",
        "uses",
        "used",
        "using",
        "make",
        "makes",
        "making",
        "enable",
        "enables",
        "enabled",
        "enabling",
        "disable",
        "disables",
        "disabled",
        "allow",
        "allows",
        "allowed",
        "improve",
        "improves",
        "improved",
        "improvement",
        "improvements",
        "refactor",
        "refactors",
        "refactored",
        "refactoring",
        "clean",
        "cleanup",
        "move",
        "moves",
        "moved",
        "rename",
        "renames",
        "renamed",
        "handle",
        "handles",
        "handling",
        "set",
        "sets",
        "get",
        "gets",
        "avoid",
        "avoids",
        "bump",
        "bumps",
        "bumped",
        "introduce",
        "introduces",
        "implement",
        "implements",
        "implementation",
        "change",
        "changes",
        "changed",
        "issue",
        "issues",
        "bug",
        "bugs",
        "minor",
        "initial",
        "misc",
        "various",
        "small",
        "some",
        "several",
        "correct",
        "correctly",
        "properly",
        "proper",
        "default",
        "defaults",
        "option",
        "options",
        "ensure",
        "ensures",
        "follow",
        "followup",
        "follow-up",
        "revert",
        "reverts",
        "reverted",
        "apply",
        "applies",
        "keep",
        "keeps",
        "let",
        "lets",
        "dev",
        "main",
        "chore",
        "feat",
        "perf",
        "docs",
        "doc",
        "ci",
        "test",
        "tests",
        "build",
        "deps",
        "wip",
        "nightly",
        "sync",
        "last",
        "first",
        "code",
        "logic",
        "working",
        "another",
        "type",
        "way",
        "case",
        "cases",
        "able",
        "unable",
        "instead",
        "now",
        "still",
        "already",
        "just",
        "possible",
        "necessary",
        "unnecessary",
        "unused",
        "missing",
        "wrong",
        "broken",
        "better",
        "faster",
        "extra",
        "additional",
        "related",
    ]
)
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_]*+(?:[.\-][A-Za-z0-9_]++)*+")


@dataclass(frozen=True)
class Term:
    key: str  # lower case, without a plural `s`: how terms are compared
    text: str  # as the author wrote it
    named: bool  # looks like a name: an acronym, a capital or a digit inside the word


def term_key(word: str) -> str:
    if len(word) > 2 and word.endswith("s") and word[-2].isupper():  # GPUs, PRs: an acronym's plural
        return word[:-1].lower()
    key = word.lower()
    if len(key) > 3 and key.endswith("s") and not key.endswith(("ss", "us", "is")) and key[-2].isalpha():
        key = key[:-1]
    return key


def is_named(word: str) -> bool:
    """An acronym, or a word with a capital or a digit after its first letter (`GTP`, `mHC`, `Qwen3`, `v2`)."""
    return any(char.isupper() or char.isdigit() for char in word[1:])


@lru_cache(maxsize=65_536)
def title_terms(title: str) -> tuple[Term, ...]:
    """The words of a cleaned title that say what it is about, in order, each once."""
    seen: set[str] = set()
    terms = []
    # The conventional-commit scope a bullet leaves out (`fix(fsdp):`) still says what the change is about.
    for word in _TOKEN.findall(_ANY_TICKET.sub(" ", display_title(title[:MAX_TITLE]))):
        word = word.strip("_")
        key = term_key(word)
        if len(key) < 2 or key in STOP_WORDS or word.lower() in STOP_WORDS or key.isdigit() or key in seen:
            continue
        seen.add(key)
        terms.append(Term(key, word, is_named(word)))
    return tuple(terms)


def word_count(text: str) -> int:
    return len(text.split())
