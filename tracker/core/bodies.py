"""A PR's body as reports read it: its text, untrusted, cleaned once for every reader. Pure.

The narrator's request (tracker.narration.schema) and the summary sentence of a highlight
(tracker.core.descriptions) both read `body_text(body)[:READ]`, and nothing else of a body: so the month's
digest can keep a long body as that text (tracker.store.month_digest.body_excerpt) and every report made
from the digest is the one the whole body makes.

`body_text` is what GitHub shows of the body, as plain lines: HTML comments taken out (PR templates are full
of instructions to their authors in comments, which GitHub does not show), each line made a `line` (no
control or invisible character, no block marker of the narrator's prompt, spaces collapsed), and one empty
line where the body has a blank line between paragraphs. Cleaning its own result gives it back.
"""

from __future__ import annotations

import re

from tracker.core import groups

READ = 1_500  # characters of a body's text that reports read
MAX_LINE = 256  # characters of one title, label, path or commit subject (GitHub's limit for a title)

# C0 and C1 controls, DEL, the line and paragraph separators; and the invisible characters that reorder or
# hide text (bidirectional controls, zero-width characters, the BOM, tag characters), as in
# tracker.reports.render, whose reasons hold here: a model reads what a person would not see.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_INVISIBLE = re.compile("[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\U000e0000-\U000e007f]+")
_SPACES = re.compile(r"\s+")
# `_CONTROL` but for the line break, and `_SPACES` within a line: `line` of every line of a text at once.
_CONTROL_IN_LINE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]+")
_HORIZONTAL = re.compile(r"[^\S\n]+")
# The markers of the narrator's data block, and any run of three or more angle brackets that could become
# one: each is replaced by a space, so that no new run forms where one is taken out. On single-spaced text.
DELIMITER = re.compile(r"<<<++(?: ?(?:PR DATA|ENGLISH))?|(?:(?:PR DATA|ENGLISH) ?)?>>>++", re.IGNORECASE)


def line(text: str, limit: int = MAX_LINE) -> str:
    """Untrusted text as one line: no control or invisible character, no block marker, at most `limit`
    characters."""
    spaced = _SPACES.sub(" ", _CONTROL.sub(" ", _INVISIBLE.sub("", text[: groups.MAX_BODY])))
    return cut(_SPACES.sub(" ", DELIMITER.sub(" ", spaced)).strip(), limit)


def body_text(text: str, enough: int | None = None) -> str:
    """A PR body as lines of `line`, without HTML comments; paragraphs apart by one empty line; uncut, or
    read only until it holds more than `enough` characters (its first `enough` are then the whole text's).

    The lines are cleaned a chunk at a time, each expression over the whole chunk (a body has dozens of short
    lines, and a call per line cost more than the cleaning): the same text as `line` on each line, because
    none of the expressions below reaches across a line break."""
    text = without_comments(text[: groups.MAX_BODY]).replace("\r\n", "\n").replace("\r", "\n")
    lines: list[str] = []
    size = 0
    start = 0
    while start < len(text):
        # A cleaned line is never longer than the line it came from, so a chunk of `enough` characters (to the
        # end of its last line) holds at least as much as the lines cleaned from it.
        end = -1 if enough is None else text.find("\n", start + enough)
        end = len(text) if end == -1 else end
        chunk = text[start:end]
        if not chunk.isascii():  # the invisible characters are not ASCII
            chunk = _INVISIBLE.sub("", chunk)
        chunk = _HORIZONTAL.sub(" ", _CONTROL_IN_LINE.sub(" ", chunk))
        if "<<<" in chunk or ">>>" in chunk:
            chunk = _HORIZONTAL.sub(" ", DELIMITER.sub(" ", chunk))
        for raw in chunk.split("\n"):
            cleaned = cut(raw.strip(), groups.MAX_BODY)
            if cleaned:
                lines.append(cleaned)
                size += len(cleaned) + 1
            elif lines and lines[-1]:
                lines.append("")  # a blank line between paragraphs, once
                size += 1
            if enough is not None and size > enough + 1:
                end = len(text)
                break
        start = end + 1
    if lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def without_comments(text: str) -> str:
    """Without `<!-- ... -->`. One not closed hides the rest, as on GitHub (an HTML block of CommonMark's
    type 2 runs to the end of the document)."""
    parts, start = [], 0
    while (opening := text.find("<!--", start)) != -1:
        parts.append(text[start:opening])
        closing = text.find("-->", opening + 4)
        start = len(text) if closing == -1 else closing + 3
    parts.append(text[start:])
    return "".join(parts)


def cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + "…" if limit > 0 else ""
