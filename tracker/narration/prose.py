"""The language-model narrator's prose in a report: read, never written, on the request path.

A repository that opts in (`narrator: llm`, with TRACKER_LLM_BASE_URL and TRACKER_LLM_MODEL set) gets,
for each section, the prose a worker stored for exactly this section's input (the content digest of
tracker.narration.schema's input, the prompt version and the model: tracker.narration.store). A section
whose input changed since (a new PR, a retitle) has no prose yet and reads deterministically until the
worker has written it; a section the model failed on reads deterministically and the JSON says why.
"""

from __future__ import annotations

from dataclasses import replace

from tracker.config import TrackerConfig
from tracker.core.report import Report
from tracker.narration import schema as narration
from tracker.narration.store import NarrationStore, content_digest


def wanted_sections(report: Report) -> list[tuple[str, str]]:
    """(section id, content digest) of each section with changes the narrator describes (upkeep aside:
    `narration.narrated_changes`)."""
    return [
        (section.id, content_digest(narration.section_input(report, section.id)))
        for section in report.sections
        if narration.narrated_changes(section)
    ]


def with_prose(report: Report, store: NarrationStore, config: TrackerConfig) -> Report:
    """`report` with the stored prose of its sections, when its repository uses the narrator."""
    repo = report.snapshot.repo
    model = config.narrator_model
    if model is None or config.narrator_for(repo) != "llm":
        return report
    month = str(report.snapshot.window.month)
    pairs = {}
    fallbacks: list[dict[str, str]] = []
    waiting = []
    for section, digest in wanted_sections(report):
        stored = store.get(repo, month, section, digest, narration.PROMPT_VERSION, model)
        if stored is None:
            waiting.append(section)
        elif stored.english is not None and stored.chinese is not None:
            pairs[section] = (stored.english, stored.chinese)
        else:  # refused: why, the last time it was asked (the row keeps one fallback per refusal)
            fallbacks.extend(dict(f) for f in stored.fallbacks[-1:])
    applied = narration.apply(report, pairs, model, fallbacks)
    return replace(applied, narrator={**applied.narrator, "waiting": waiting})
