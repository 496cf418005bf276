"""The language-model narrator: prose for a report's sections, validated, or the deterministic text.

For each section with changes a model describes (upkeep aside: tracker.narration.schema.narrated_changes),
one request asks the model for the section's prose in English (tracker.narration.schema builds the request
and checks the answer). An answer that breaks a rule (a
change dropped, invented or placed twice, a URL or Markdown in the text, too long, not JSON) gets one
targeted retry naming what was wrong; a second bad answer, or a failure of the endpoint (timeout, rate
limit, error), leaves that section to the deterministic text and says so in `fallbacks`. The Chinese is
a translation of the validated English, checked the same way plus the glossary (terms kept verbatim)
and the citations (the same changes, in the same order); if it fails twice, that section is left to the
deterministic text in both languages (the model may regroup changes, and a report's two languages always
cite the same changes in the same order).

The model writes words only: the application owns the sections, the change groups, which changes each
sentence covers (checked: each exactly once, only ids it was given), the citations and the numbers.
Nothing here renders; the caller stores `Narration` and the report applies it. `Narration.requests` counts
HTTP requests (every retry of the client: each may be billed), and `Narration.error` says what failed when
the endpoint did (a wrong key, a timeout, a 5xx, an exhausted quota), so that the caller can say so; a rate
limit that says when to come back is no error but `retry_after`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tracker.core.report import Report
from tracker.narration import schema as narration
from tracker.narration.client import ChatClient, Completion, LlmError
from tracker.narration.schema import DEFAULT_BUDGET, Problem, SectionInput, SectionProse


@dataclass(frozen=True)
class Fallback:
    """One section (or one section's Chinese) left to the deterministic text, and why."""

    section: str
    stage: str  # "english" or "chinese"
    # An LlmError kind ("timeout", "rate_limited", "http", ...), "quota" (the account's quota is used up),
    # "too_large" (the section does not fit the prompt budget) or "invalid: <problem codes>" (answers refused).
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"section": self.section, "stage": self.stage, "reason": self.reason}


@dataclass(frozen=True)
class SectionNarration:
    section: str
    english: SectionProse | None  # None: the deterministic text, in both languages
    chinese: SectionProse | None  # None exactly when english is


@dataclass(frozen=True)
class Narration:
    model: str
    prompt_version: str
    sections: tuple[SectionNarration, ...]
    fallbacks: tuple[Fallback, ...]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0  # HTTP requests, every retry of the client included
    retry_after: float | None = None  # the endpoint asked to wait this long (a rate limit)
    error: str | None = None  # the endpoint's last failure (not a rate limit it said when to end), for the operator

    @property
    def narrated(self) -> tuple[str, ...]:
        """The sections with prose in both languages."""
        return tuple(s.section for s in self.sections if s.english is not None)

    def section(self, section_id: str) -> SectionNarration | None:
        return next((s for s in self.sections if s.section == section_id), None)


@dataclass
class _Tally:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retry_after: float | None = None
    rate_limited: bool = False
    error: str | None = None
    fallbacks: list[Fallback] = field(default_factory=list)

    def count(self, completion: Completion) -> None:
        self.prompt_tokens += completion.prompt_tokens
        self.completion_tokens += completion.completion_tokens


def narrate(
    report: Report,
    client: ChatClient,
    bodies: Mapping[int, str] | None = None,
    commits: Mapping[int, Sequence[str]] | None = None,
    glossary: Sequence[str] = (),
    sections: Sequence[str] | None = None,
    budget: int = DEFAULT_BUDGET,
) -> Narration:
    """Prose for the sections of `report` that have changes a model describes (`narrated_changes`; only the
    sections named in `sections`, when given).
    Never raises for the endpoint or the model: every failure is a fallback. `glossary`: terms the
    repository wants kept verbatim in Chinese. `budget`: the most characters of PR text one request
    carries (tracker.narration.schema.fit); a section that cannot be cut to it is a `too_large` fallback."""
    tally = _Tally()
    sent = client.requests
    narrated = []
    for section in report.sections:
        if not narration.narrated_changes(section) or (sections is not None and section.id not in sections):
            continue
        if tally.rate_limited:  # the endpoint said when to come back: the rest waits for then too
            tally.fallbacks.append(Fallback(section.id, "english", "rate_limited"))
            narrated.append(SectionNarration(section.id, None, None))
            continue
        data = narration.fit(narration.section_input(report, section.id, bodies or {}, commits or {}), budget)
        if data is None:
            tally.fallbacks.append(Fallback(section.id, "english", "too_large"))
            narrated.append(SectionNarration(section.id, None, None))
            continue
        english = _english(client, data, tally)
        chinese = _chinese(client, english, data.section, glossary, tally) if english is not None else None
        if chinese is None:  # both languages of a section cite the same changes in the same order
            english = None
        narrated.append(SectionNarration(section.id, english, chinese))
    return Narration(
        model=client.model,
        prompt_version=narration.PROMPT_VERSION,
        sections=tuple(narrated),
        fallbacks=tuple(tally.fallbacks),
        prompt_tokens=tally.prompt_tokens,
        completion_tokens=tally.completion_tokens,
        requests=client.requests - sent,
        retry_after=tally.retry_after,
        error=tally.error,
    )


def _english(client: ChatClient, data: SectionInput, tally: _Tally) -> SectionProse | None:
    messages = narration.prompt_messages(data)
    return _ask(client, messages, lambda prose: narration.validate(prose, data), data.section, "english", tally)


def _chinese(
    client: ChatClient, english: SectionProse, section: str, configured: Sequence[str], tally: _Tally
) -> SectionProse | None:
    texts = [english.overview, *(text for theme in english.themes for text in _texts(theme))]
    glossary = narration.glossary_terms(texts, configured)
    messages = narration.translation_messages(english, glossary)
    return _ask(
        client,
        messages,
        lambda prose: narration.translation_problems(english, prose, glossary),
        section,
        "chinese",
        tally,
    )


def _texts(theme: narration.ThemeProse) -> list[str]:
    return [theme.title, theme.summary, *(highlight.sentence for highlight in theme.highlights)]


def _ask(
    client: ChatClient,
    messages: list[dict[str, str]],
    check: Callable[[SectionProse], list[Problem]],
    section: str,
    stage: str,
    tally: _Tally,
) -> SectionProse | None:
    """One request and, if its answer breaks a rule, one targeted retry; None (a fallback) otherwise."""
    problems: list[Problem] = []
    for attempt in range(2):
        try:
            completion = client.complete_json(messages, narration.response_schema(), narration.SCHEMA_NAME)
        except LlmError as error:
            # An exhausted quota is a 429 too, but no wait ends it: it is a failure, like a wrong key.
            waitable = error.kind == "rate_limited" and error.code != "insufficient_quota"
            tally.rate_limited = tally.rate_limited or waitable
            if waitable and error.retry_after is not None:
                tally.retry_after = max(tally.retry_after or 0.0, error.retry_after)
            if not waitable:
                tally.error = str(error)
            reason = "quota" if error.kind == "rate_limited" and not waitable else error.kind
            tally.fallbacks.append(Fallback(section, stage, reason))
            return None
        tally.count(completion)
        parsed = narration.parse(completion.text)
        problems = parsed if isinstance(parsed, list) else check(parsed)
        if not problems and not isinstance(parsed, list):
            return parsed
        if attempt == 0:
            messages = [
                *messages,
                {"role": "assistant", "content": completion.text[: narration.MAX_ANSWER]},
                narration.repair_message(problems),
            ]
    codes = sorted({problem.code for problem in problems})
    tally.fallbacks.append(Fallback(section, stage, "invalid: " + ", ".join(codes)))
    return None
