"""Reading a rendered report's bullets back: their citations, changes and words (for the tests of
limits, which must not ask the code under test how it counted)."""

from __future__ import annotations

import re

CITATION = re.compile(r"\[([^\]\[]+) #(\d+)\]\(https://github\.com/NVIDIA/Megatron-LM/pull/(\d+)\)")
# A change in a bullet ends with its citations in brackets, then "; " or the bullet's full stop.
CHANGE = re.compile(r"[(（]\[[^\n]*?[)）](?:; |；|\.$|。$)")
CJK = re.compile(r"[\u4e00-\u9fff]")


def changes(line: str) -> list[str]:
    return CHANGE.findall(line)


def words(line: str) -> int:
    """Words of a bullet's text, citations and punctuation aside; a Chinese character is a word."""
    text = CITATION.sub(" ", line)
    return len([w for w in text.split() if re.search(r"[A-Za-z0-9]", w)]) + len(CJK.findall(text))
