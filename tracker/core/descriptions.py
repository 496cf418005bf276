"""What a PR says it does, in one sentence from its own description (issue 32, item 6). Pure.

`summary_sentence(body)` reads the first `bodies.READ` characters of a PR body's text as GitHub shows it
(`tracker.core.bodies.body_text`: what the narrator reads too, and what the month's digest keeps of a long
body) and returns the first sentence of its summary, cleaned, or None. The summary is the first section
headed like one ("What does this PR do?", "Summary", "Description", "Motivation", "Overview", "Changes"...,
as a Markdown heading, a bold line or a `Label:` line) that holds a sentence, else the text before the
body's first heading. In it the first paragraph that is prose gives the sentence; a list gives its first
item that is prose; a paragraph that ends with a colon introduces the list after it. Skipped on the way:
HTML comments (a PR template's instructions to its author; one left open hides the rest, as on GitHub), code
blocks, tables, quotes, HTML lines, checklists, reference lines ("Fixes #12") and a template's own text
("Please include a summary...").

The sentence keeps a link's text and drops its address, drops images, bare URLs, e-mail addresses,
@mentions, `#123` references, HTML tags, emoji and Markdown emphasis, and keeps inline code in backticks.
It is at most `MAX_WORDS` words: a longer first sentence gives None rather than a cut one, which reads badly,
and the caller falls back to the cleaned title. So does a body without a summary, or with one of fewer than
`MIN_WORDS` words or in a script other than Latin (the report quotes the sentence in both languages).

Bodies come from anyone who can open a PR, so the work is linear in the body: it is read to
`bodies.READ` characters of text, a paragraph to `MAX_PARAGRAPH` before its inline text is cleaned, and every
pattern is anchored or possessive, so that none backtracks over a run more than once.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from tracker.core import memo
from tracker.core.bodies import READ, body_text
from tracker.core.titles import word_count

MAX_WORDS = 30  # of the sentence (issue 32: "at most 30 words")
MIN_WORDS = 4  # fewer says less than the title does ("Fixes the bug.")
# Characters of one paragraph or list item read for its first sentence: 30 words of Markdown, links with
# long addresses included, fit many times over.
MAX_PARAGRAPH = 4_000
# A summary is at the top of a body: a template's whole text is under a hundred lines. Reading no further
# than this many lines, summary sections and blocks of one keeps a hostile body's cost small and fixed.
MAX_LINES = 1_000
MAX_SECTIONS = 5
MAX_BLOCKS = 25
# A line break inside a paragraph is a wrap when the next word would not have fit on a 72-column line (how
# commit messages, which GitHub copies into a one-commit PR's body, are wrapped), else the author ended
# the line on purpose: on GitHub a line break in a PR body shows as one.
_WRAP_WIDTH = 72
_LONG_LINE = 100  # no one wrapping by hand writes a longer line

# Headings of a summary section, as `_label` writes them.
_SUMMARY_LABELS = frozenset(
    {
        "what does this pr do",
        "what does this pull request do",
        "what does this change do",
        "what this pr does",
        "what this pull request does",
        "what this change does",
        "summary",
        "pr summary",
        "short summary",
        "change summary",
        "changes summary",
        "description",
        "pr description",
        "pull request description",
        "change description",
        "overview",
        "motivation",
        "motivation and context",
        "background",
        "changes",
        "changes made",
        "proposed changes",
        "what changed",
        "whats changed",
        "what and why",
        "tldr",
        "tl dr",
    }
)
# A heading that starts with one of these words is a summary's too ("Summary of changes", "Summary by
# CodeRabbit", "Description of the change").
_SUMMARY_PREFIXES = ("summary ", "description ", "overview ", "motivation ")

# Words that start a line that only points elsewhere ("Fixes #12", "Closes: https://...", "cc @x"), and a
# template's placeholders: a short paragraph of only these is passed over, another short one ends the search.
_POINTERS = frozenset(
    [
        "fix",
        "fixes",
        "fixed",
        "close",
        "closes",
        "closed",
        "resolve",
        "resolves",
        "resolved",
        "related",
        "relates",
        "ref",
        "refs",
        "see",
        "cc",
        "part",
        "depends",
        "follow",
        "followup",
        "follow-up",
        "issue",
        "issues",
        "jira",
        "ticket",
        "n/a",
        "na",
        "none",
        "nothing",
        "todo",
        "tbd",
        "tba",
        "wip",
        "to",
        "of",
        "in",
        "by",
        "the",
        "a",
        "an",
        "and",
    ]
)
# A template's instructions to its author ("Describe your changes", "Explain the motivation", "Add a one line
# overview"): a sentence that asks, or one that starts with such a verb and names the template's own objects.
# "Add tests for the changes in X" is a summary: after "add" and its like only words addressed to the author
# count.
_PLEASE = re.compile(r"\bplease\b")
_ASKING = ("a clear and concise", "if applicable", "optional:", "e.g.", "example:")
_DESCRIBING = frozenset({"describe", "briefly", "explain", "summarize", "summarise", "fill", "replace"})
_ABOUT_TEMPLATE = re.compile(
    r"\b(?:your|you|this pr|the pr|this pull request|this template|the title|a summary|a description"
    r"|the changes?|the issue|the motivation|the context|an? overview|one line|here)\b"
)
_ADDING = frozenset({"add", "provide", "list", "include", "write", "insert", "link", "mention"})
_ADDRESSED = re.compile(
    r"\b(?:your|you|this pr|this pull request|this template|a summary|a description|an overview|one line"
    r"|if applicable|here)\b"
)

# --- lines --------------------------------------------------------------------------------------------------
_ATX = re.compile(r" {0,3}+(#{1,6}+)(?:[ \t]++(.*+)|[ \t]*+$)")
_SETEXT = re.compile(r" {0,3}+(?:=++|-++)[ \t]*+$")
_BREAK = re.compile(r" {0,3}+(?:(?:\*[ \t]*+){3,}+|(?:_[ \t]*+){3,}+|(?:-[ \t]*+){3,}+)$")
_FENCE = re.compile(r" {0,3}+(`{3,}+|~{3,}+)")
_ITEM = re.compile(r"([ \t]*+)(?:[-*+]|\d{1,9}+[.)])(?:[ \t]++(.*+)|[ \t]*+$)")
_CHECKBOX = re.compile(r"\[[ xX]\](?:[ \t]|$)")
_QUOTE = re.compile(r" {0,3}+>")
_HTML_LINE = re.compile(r" {0,3}+</?[A-Za-z]")
_DEFINITION = re.compile(r" {0,3}+\[[^\[\]]{1,999}+\]:")
_TABLE_DELIMITER = re.compile(r"[ \t]*+\|?[ \t]*+:?-++:?[ \t]*+(?:\|[ \t]*+:?-++:?[ \t]*+)++\|?[ \t]*+$")
# `**Summary**`, `**Summary:** text`, `__Summary__:`: a bold label that begins a line.
_BOLD_LABEL = re.compile(r"[ \t]*+(\*\*|__)([^*_\n]{1,80}+)\1[ \t]*+(:?)[ \t]*+(.*+)")
_LABEL_ONLY = re.compile(r"[ \t]*+(?:\*\*|__)[^*_\n]{1,80}+(?:\*\*|__)[ \t]*+:?[ \t]*+$|.*:[ \t]*+$")
# `Summary:` or `Summary: text`, for the labels of `_SUMMARY_LABELS` only.
_PLAIN_LABEL = re.compile(r"[ \t]*+([A-Za-z][A-Za-z' ]{0,40}+)[ \t]*+[:?][ \t]*+(.*+)")

# --- inline text --------------------------------------------------------------------------------------------
_COMMENT = re.compile(r"<!--[\s\S]*?(?:-->|\Z)")
# A link's destination may hold one level of parentheses (`javascript:alert(1)`, Wikipedia's addresses).
_DESTINATION = r"\((?:[^()]|\([^()]{0,999}+\)){0,999}+\)"
_IMAGE = re.compile(rf"!\[[^\[\]]{{0,999}}+\](?:{_DESTINATION}|\[[^\[\]]{{0,999}}+\])?")
_LINK = re.compile(rf"\[([^\[\]]{{0,999}}+)\](?:{_DESTINATION}|\[[^\[\]]{{0,999}}+\])")
_TAG = re.compile(r"</?[A-Za-z!?][^<>]{0,2999}+>")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,30}+://\S*+|\bwww\.\S++|\b(?:javascript|vbscript|data|file|mailto):\S++")
_EMAIL = re.compile(r"[\w.+-]{1,64}+@[\w-]{1,63}+(?:\.[\w-]{1,63}+)++")
_MENTION = re.compile(r"(?<![\w@])@[A-Za-z0-9][\w-]{0,38}+(?:/[\w.-]{1,100}+)?")
_REFERENCE = re.compile(
    r"(?<![\w&])(?:(?:PRs?|pull request|issue)[ \t]?)?(?:[\w.-]{1,100}+/[\w.-]{1,100}+)?[#＃][0-9０-９]++\b|\bGH-\d++\b"
)
_SHORTCODE = re.compile(r"(?<!\S):[a-z0-9_+-]{1,40}+:(?![\w:])")
_EMPHASIS = re.compile(r"\*++|_++|~~++")
_BACKTICKS = re.compile(r"`++")
_EMPTY_BRACKETS = re.compile(r"\(\s*+\)|\[\s*+\]|\]\(\s*+")
# Words that a removed reference or mention leaves behind: "(see #12, thanks @alice)", "thanks to @bob.".
_LEFT_BEHIND = frozenset({"see", "cc", "thanks", "thank", "by", "to", "from", "via", "with", "and", "or", "also"})
_ASIDE = re.compile(r"\(([^()]{0,300}+)\)")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s++(?=[.,;:!?)](?:\s|$))")
_SPACES = re.compile(r"\s++")
# Where a sentence may end: terminal punctuation, closing quotes or brackets, then a space or the end.
_SENTENCE_END = re.compile(r"[.!?]++[\"'’”)\]]*+(?=\s|$)")
_TERMINAL = re.compile(r"[.!?][\"'’”)\]]{0,3}+\Z")
_ABBREVIATIONS = frozenset({"e.g.", "i.e.", "vs.", "cf.", "approx.", "incl.", "fig.", "no.", "mr.", "dr.", "resp."})
_WORD = re.compile(r"[(\"'“‘]?[A-Za-z][A-Za-z0-9'’.-]*+[,;:!?)\"'’”]*+")
_ARROWS = (("<->", "↔"), ("->", "→"), ("<-", "←"), ("=>", "⇒"), (">=", "≥"), ("<=", "≤"))
# What the returned sentence never holds, whatever the steps above missed.
_UNSAFE = re.compile(r"://|@[^\W\d_]|[<>]|\bwww\.|\b(?:javascript|vbscript|data):\S", re.IGNORECASE)


@dataclass
class _Block:
    """A heading, a paragraph, a list (each item's lines) or something else (code, a table, a quote)."""

    kind: str  # "heading", "paragraph", "list", "other"
    lines: list[str] = field(default_factory=list)
    items: list[list[str]] = field(default_factory=list)


def summary_sentence(body: str | None) -> str | None:
    """The first sentence of the body's summary, cleaned, at most `MAX_WORDS` words; None without one."""
    if not body:
        return None
    offered = memo.known("summary_sentence", body)  # "" for none
    if offered is not memo.MISSING:
        return str(offered) or None
    if len(body) <= _REMEMBERED:
        return _remembered(body)
    return _summary_sentence(body)


# Every report of a month reads the same bodies again; most are a few KB (a template), and those are
# remembered, so that the memo holds at most 2,048 × 8 KB whatever the bodies are.
_REMEMBERED = 8_192


@lru_cache(maxsize=2_048)
def _remembered(body: str) -> str | None:
    return _summary_sentence(body)


def _summary_sentence(body: str) -> str | None:
    blocks = list(_blocks(_visible(body_text(body, READ)[:READ])))
    sections: list[list[_Block]] = []
    preamble: list[_Block] = []
    current: list[_Block] | None = preamble
    for block in blocks:
        if block.kind == "heading":
            current = [] if _is_summary_label(block.lines[0]) else None
            if current is not None:
                sections.append(current)
        elif current is not None:
            current.append(block)
    for section in [*sections[:MAX_SECTIONS], preamble]:
        sentence = _section_sentence(section)
        if sentence is not None:
            return sentence
    return None


# --- blocks -------------------------------------------------------------------------------------------------


def _visible(text: str) -> str:
    """The body as GitHub shows its text: no HTML comments, one kind of line break, no invisible or control
    characters (a zero-width space inside "Sum\u200bmary" still reads "Summary")."""
    text = _COMMENT.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    return text.translate(_INVISIBLE)


class _InvisibleTable(dict[int, int | str | None]):
    """`str.translate`'s table, filled as characters are met: format characters (zero-width, bidirectional
    controls, the BOM, tag characters) go, controls become spaces, line and paragraph separators breaks."""

    def __missing__(self, code: int) -> int | str | None:
        category = unicodedata.category(chr(code))
        value: int | str | None = code
        if code in (0x2028, 0x2029):
            value = "\n"
        elif category == "Cf":
            value = None
        elif category == "Cc" and code != 0x0A:
            value = " "
        self[code] = value
        return value


_INVISIBLE = _InvisibleTable()


def _blocks(text: str) -> Iterator[_Block]:
    """The body's blocks in order, read line by line as CommonMark would, closely enough for a summary."""
    block: _Block | None = None
    fence: str | None = None
    for line in text.split("\n", MAX_LINES)[:MAX_LINES]:
        stripped = line.strip()
        if fence is not None:  # inside a code block: only its closing fence matters
            if stripped.startswith(fence) and stripped.strip(fence[0]) == "":
                fence = None
            continue
        if not stripped:
            if block:
                yield block
            block = None
            continue
        # A line that starts with a letter is text, or a label (`Summary:`); only the rest can be structure.
        if stripped[0].isalpha():
            kind, heading = "text", _label_heading(line, stripped)
        else:
            kind, heading = _structure(line, block)
        if heading is not None:
            if block:
                yield block
            block = None
            label, rest = heading
            yield _Block("heading", [label])
            if rest:
                block = _Block("paragraph", [rest])
        elif kind == "fence":
            fence = stripped[: len(stripped) - len(stripped.lstrip(stripped[0]))]  # closed by as long a run
            if block:
                yield block
            block = None
            yield _Block("other")
        elif kind == "underline" and block:  # `Summary` over `-------`
            yield _Block("heading", [block.lines[0]])
            block = None
        elif kind == "header row" and block:
            block.kind = "other"  # the paragraph was a table's header row
        elif kind == "other":
            if block:
                yield block
            block = None
            yield _Block("other")
        elif kind == "table":
            if block and block.kind != "other":
                yield block
                block = None
            block = block or _Block("other")
        elif kind == "item":
            if block and block.kind != "list":
                yield block
                block = None
            block = block or _Block("list")
            item = _ITEM.match(line)
            block.items.append([item.group(2) or "" if item else ""])
        elif block is None and line.startswith(("    ", "\t")):  # indented code
            yield _Block("other")
        else:
            block = block or _Block("paragraph")
            if block.kind == "list":
                block.items[-1].append(line)
            else:
                block.lines.append(line)
    if block:
        yield block


def _structure(line: str, block: _Block | None) -> tuple[str, tuple[str, str] | None]:
    """What a line that does not start with a letter is: a heading (with its text and what follows it),
    a fence, a setext underline, a table's header row or other row, a list item, another block ("other":
    a thematic break, a quote, an HTML line, a link definition) or text."""
    first_paragraph_line = block is not None and block.kind == "paragraph" and len(block.lines) == 1
    atx = _ATX.match(line)
    if atx:
        return "heading", ((atx.group(2) or "").rstrip("# \t"), "")
    bold = _BOLD_LABEL.fullmatch(line)
    if bold and (bold.group(3) or bold.group(2).rstrip().endswith(":") or not bold.group(4)):
        # `**Summary**` alone, or `**Summary:** text`; `**Important** change` is text.
        return "heading", (bold.group(2).rstrip(": \t"), bold.group(4))
    if _FENCE.match(line):
        return "fence", None
    if first_paragraph_line and _SETEXT.match(line):
        return "underline", None
    if _BREAK.match(line) or _QUOTE.match(line) or _HTML_LINE.match(line) or _DEFINITION.match(line):
        return "other", None
    if first_paragraph_line and _TABLE_DELIMITER.match(line):
        return "header row", None
    if line.lstrip().startswith("|"):
        return "table", None
    if _ITEM.match(line):
        return "item", None
    return "text", None


def _label_heading(line: str, stripped: str) -> tuple[str, str] | None:
    """A summary label as plain text that begins a line (`Summary: text`, `What does this PR do?`)."""
    plain = _PLAIN_LABEL.fullmatch(line)
    if plain and _is_summary_label(plain.group(1)):
        return plain.group(1), plain.group(2)
    if len(stripped) <= 40 and _label(stripped) in _SUMMARY_LABELS:
        return stripped, ""
    return None


def _label(text: str) -> str:
    """A heading as compared with `_SUMMARY_LABELS`: lower case, letters and single spaces only."""
    if text.isascii():
        letters = text.translate(_ASCII_LABEL)
    else:
        letters = "".join(char if char.isalnum() or char.isspace() else ("" if char in "'’" else " ") for char in text)
    return " ".join(letters.lower().split())


# `_label`'s mapping of the ASCII characters, for `str.translate`: letters, digits and spaces stay, the
# apostrophe goes, anything else becomes a space.
_ASCII_LABEL = {
    code: code if chr(code).isalnum() or chr(code).isspace() else None if chr(code) == "'" else " "
    for code in range(128)
}


def _is_summary_label(text: str) -> bool:
    label = _label(text[:200])
    return label in _SUMMARY_LABELS or label.startswith(_SUMMARY_PREFIXES)


# --- sentences ----------------------------------------------------------------------------------------------


def _section_sentence(blocks: Sequence[_Block]) -> str | None:
    """The sentence of the first prose paragraph or list item of a section; None if the section has none,
    or if its first prose is too short or too long to stand for the change."""
    introduced = False
    for block in blocks[:MAX_BLOCKS]:
        if block.kind == "list":
            for lines in block.items:
                if _CHECKBOX.match(lines[0]) or _LABEL_ONLY.match(lines[0]):
                    continue  # a checklist, or a label over the items nested in it ("**Bug Fixes**")
                found, sentence = _candidate(lines)
                if found and not (sentence and sentence.endswith(":")):
                    return sentence
            if introduced:
                return None
        elif block.kind == "paragraph":
            if introduced:
                return None
            found, sentence = _candidate(block.lines)
            if found:
                if sentence is not None and sentence.endswith(":"):
                    introduced = True  # "This PR does the following:" and a list
                    continue
                return sentence
        elif introduced:
            return None
    return None


def _candidate(lines: Sequence[str]) -> tuple[bool, str | None]:
    """Whether these lines settle the section, and their sentence. Lines that only point elsewhere, a
    template's instructions and text without words settle nothing: the next block is read."""
    raw = _joined(lines)
    text = _inline(raw)
    if not text:
        return False, None
    sentence, ended = _first_sentence(text)
    lower = sentence.lower()
    words = sentence.split()
    plain = [word for word in words if _WORD.fullmatch(word)]
    if _instructs(lower, words[0].lower()):
        return False, None
    if sentence.endswith(":"):
        return True, sentence
    if len(plain) < MIN_WORDS:
        if not plain or all(word.lower().strip("():.,;-") in _POINTERS for word in words):
            return False, None  # "Fixes # (issue)", "N/A", "Related to #12"
        return True, None  # a real but short summary: the title says more
    cut = not ended and len(raw) > MAX_PARAGRAPH  # its end may lie beyond what was read
    if cut or word_count(sentence) > MAX_WORDS or 2 * len(plain) < len(words):
        return True, None  # too long to quote whole, or more code and paths than words
    if not (sentence[0].isalnum() or sentence[0] == "`") or _UNSAFE.search(sentence):
        return True, None
    return True, _finished(sentence)


def _instructs(lower: str, first_word: str) -> bool:
    """Whether a sentence (in lower case) is a template's instruction to the PR's author."""
    if _PLEASE.search(lower) or lower.startswith(_ASKING):
        return True
    if first_word in _DESCRIBING:
        return bool(_ABOUT_TEMPLATE.search(lower))
    return first_word in _ADDING and bool(_ADDRESSED.search(lower))


def _joined(lines: Sequence[str]) -> str:
    """A paragraph's lines as one text; a line its author ended on purpose ends its sentence (`_WRAP_WIDTH`)."""
    parts: list[str] = []
    size = 0
    for index, line in enumerate(lines):
        line = line.strip()
        if index + 1 < len(lines) and line and (line[-1].isalnum() or line[-1] in "`)"):
            following = lines[index + 1].strip()
            first_word = following.split(" ", 1)[0]
            deliberate = len(line) + 1 + len(first_word) <= _WRAP_WIDTH or len(line) > _LONG_LINE
            if following[:1].isupper() and deliberate:
                line += "."
        parts.append(line)
        size += len(line) + 1
        if size > MAX_PARAGRAPH:
            break
    return " ".join(parts)


def _inline(text: str) -> str:
    """One paragraph's text as a reader sees it, on one line: link text without addresses, code spans kept
    in single backticks, no image, URL, e-mail, mention, reference, tag, emoji or emphasis."""
    text = html.unescape(text[:MAX_PARAGRAPH])
    text = _IMAGE.sub(" ", text)
    for _ in range(3):  # a link inside a link's text: `[a [b](x) c](y)`
        text, count = _LINK.subn(r"\1", text)
        if not count:
            break
    pieces = []
    for code, piece in _code_spans(text):
        if code:
            piece = _MENTION.sub(lambda match: match.group(0)[1:], piece.strip())  # `@torch.compile`
            piece = piece.replace("`", "")
            if piece and not _URL.search(piece) and not _EMAIL.search(piece):
                pieces.append(f"`{piece}`")
            continue
        piece = _TAG.sub(" ", piece)
        piece = _URL.sub(" ", piece)
        piece = _EMAIL.sub(" ", piece)
        piece = _MENTION.sub(" ", piece)
        piece = _REFERENCE.sub(" ", piece)
        piece = _SHORTCODE.sub(" ", piece)
        piece = _EMPHASIS.sub(_without_emphasis, piece)
        if not piece.isascii():  # no ASCII character is an emoji
            piece = "".join(char for char in piece if not _is_emoji(char))
        pieces.append(_EMPTY_BRACKETS.sub(" ", piece))
    text = _ASIDE.sub(_without_empty_aside, _SPACES.sub(" ", "".join(pieces))).strip()
    for arrow, symbol in _ARROWS:
        text = text.replace(arrow, symbol)
    return _SPACE_BEFORE_PUNCTUATION.sub("", text).strip(" -–—,;")


def _without_empty_aside(match: re.Match[str]) -> str:
    """A parenthesis that held only references and mentions, now only the words around them, goes."""
    words = re.findall(r"\w++", match.group(1).lower())
    return "" if all(word in _LEFT_BEHIND for word in words) else match.group(0)


def _code_spans(text: str) -> Iterator[tuple[bool, str]]:
    """The text in pieces, each marked as a code span or not. A run of backticks opens a span that the next
    run of the same length closes (CommonMark 6.1); one never closed is left out. Each run is looked at
    a fixed number of times: the runs of each length wait in a queue of their own."""
    runs = [(match.start(), match.end()) for match in _BACKTICKS.finditer(text)]
    by_length: dict[int, deque[int]] = {}
    for index, (start, end) in enumerate(runs):
        by_length.setdefault(end - start, deque()).append(index)
    position = 0
    index = 0
    while index < len(runs):
        start, end = runs[index]
        waiting = by_length[end - start]
        while waiting and waiting[0] <= index:
            waiting.popleft()
        if waiting:
            closer = waiting.popleft()
            yield False, text[position:start]
            yield True, text[end : runs[closer][0]]
            position = runs[closer][1]
            index = closer + 1
        else:
            yield False, text[position:start]
            position = end
            index += 1
    yield False, text[position:]


def _without_emphasis(match: re.Match[str]) -> str:
    """A run of `*`, `_` or `~~` that opens or closes emphasis goes; one inside a word (`snake_case`) or
    between spaces (`a * b`) stays."""
    text = match.string
    before = text[match.start() - 1] if match.start() > 0 else " "
    after = text[match.end()] if match.end() < len(text) else " "
    if before.isalnum() and after.isalnum() or before.isspace() and after.isspace():
        return match.group(0)
    return ""


def _is_emoji(char: str) -> bool:
    # Emoji and pictographs ("So"), their variation selectors and skin tones.
    return unicodedata.category(char) == "So" or "\ufe00" <= char <= "\ufe0f" or "\U0001f3fb" <= char <= "\U0001f3ff"


def _first_sentence(text: str) -> tuple[str, bool]:
    """The text up to its first sentence end, and whether it has one. A period
    ends a sentence before a capital, a backtick, a digit or the end; not after "e.g." or "i.e."; not inside
    `v0.17.0`, `foo.py` or 1.5, where no space follows it."""
    for match in _SENTENCE_END.finditer(text):
        end = match.end()
        following = text[end:].lstrip()[:1]
        if following and not (following.isupper() or following.isdigit() or following in "`\"'“‘("):
            continue
        word = text[text.rfind(" ", 0, end) + 1 : end].lstrip("(\"'").lower()
        if following and word in _ABBREVIATIONS:
            continue
        return text[:end], True
    return text, False


def _finished(sentence: str) -> str:
    """Capitalised, ending with terminal punctuation."""
    sentence = sentence.rstrip(" ,;:-–—")
    stop = sentence.rstrip(".!?")
    words = stop.split(" ")
    while len(words) > MIN_WORDS and words[-1].lower() in _LEFT_BEHIND:  # "thanks to @bob." without "@bob"
        words.pop()
    sentence = " ".join(words).rstrip(" ,;:-–—") + sentence[len(stop) :]
    if sentence[0].isalpha():
        sentence = sentence[0].upper() + sentence[1:]
    if not _TERMINAL.search(sentence):
        sentence += "."
    return sentence
