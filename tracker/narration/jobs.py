"""The language-model narrator's job: write the prose of a month's report at its current cutoff.

For each section whose input (tracker.narration.schema; its content digest) has no stored prose for this
prompt version and model, the narrator asks the model (tracker.narration.narrator) and stores what it got:
validated prose in both languages, or the refusal and why, with the tokens it cost. A section already
described is not asked again, so a refresh pays only for what changed; a refused one is asked again after
a back-off (tracker.narration.store: an hour, then twice as long each time), or at once when forced. Then
the month's version moves, so that cached renders are replaced, and the month's older prose is pruned.

It runs in a worker (`narrate_month`) or in the terminal (`narrate_until`, for `tracker narrate` and
`tracker finalize`), never in a request: a request renders the latest stored prose, or the deterministic
text while there is none. A rate limit of the model ends a run with the sections it could not write left
for later: the job is re-scheduled at the moment the endpoint gives, the terminal sleeps until then. A
failure of the endpoint (a wrong key, a timeout, a 5xx, an exhausted quota) stores nothing, so the next
run asks again; it is logged and kept for the status page (`NarrationStore.failed`). The input includes
the subjects of the PRs' commits inside the window, read from GitHub (tracker.github.commits) for the
sections to write; a GitHub rate limit, met by this run or by any other job, waits (re-scheduled, or slept
through) before the model is asked anything; a GitHub that cannot be reached leaves the commit subjects
out. Every HTTP request to the model is added to the month's bill (`NarrationStore.spend`), which pruning
never touches.

A month's finalisation waits for its narration (`narration_settled`, bounded by the finalisation's
deadline), and prose written after a month was frozen without it adds a revision of the record
(`refinalize_if_late`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import timedelta

from tracker import metrics
from tracker.core.report import Report
from tracker.core.window import Month, iso_utc, today_in
from tracker.github.client import BadAnswer, RateLimited, Unavailable
from tracker.github.commits import commit_messages
from tracker.github.retry import held_back, rate_limited
from tracker.narration import schema as narration
from tracker.narration.client import ChatClient
from tracker.narration.narrator import narrate
from tracker.narration.prose import wanted_sections
from tracker.narration.store import Spent, StoredNarration, refused_again
from tracker.queue import enqueue_narrate
from tracker.records.finalize import finalize
from tracker.records.publish import publish
from tracker.records.store import RecordTaken
from tracker.reports.loading import report_for, resolve
from tracker.reports.request import MonthRequest
from tracker.services import Services

log = logging.getLogger(__name__)

# When the endpoint rate-limits without saying for how long: seconds to wait.
LLM_RETRY = 60.0


@dataclass(frozen=True)
class Outcome:
    """What one run of the narrator did for a month."""

    off: bool = False  # the repository does not use the narrator
    cutoff: str = ""  # the day the report was narrated at
    wanted: tuple[str, ...] = ()  # the sections with changes a model describes
    narrated: tuple[str, ...] = ()  # those that have prose now
    why: dict[str, str] = field(default_factory=dict)  # why each other one reads deterministically
    answered: tuple[str, ...] = ()  # the sections the model answered in this run (prose or refused)
    asked: bool = False  # the model was asked anything
    error: str | None = None  # the endpoint failed: a wrong key, a timeout, a 5xx, an exhausted quota
    retry_at: float | None = None  # epoch seconds: come back then (`waiting_for`'s rate limit)
    waiting_for: str = ""  # "the model" or "GitHub"

    def said(self) -> str:
        """One line for a person: how many sections have prose, and why each other one has none."""
        if self.off:
            return "the narrator is off for this repository"
        if self.waiting_for == "GitHub":
            return f"waiting for GitHub until {iso_utc(math.ceil(self.retry_at or 0))}"
        if not self.asked and len(self.narrated) == len(self.wanted):
            return "every section already narrated"
        text = f"{len(self.narrated)} of {len(self.wanted)} sections narrated"
        text += "".join(f"; {section}: deterministic text ({reason})" for section, reason in self.why.items())
        if self.retry_at is not None:
            text += f"; rate limited, again at {iso_utc(math.ceil(self.retry_at))}"
        if self.error is not None:
            text += f"; the endpoint failed: {self.error}"
        return text


@dataclass(frozen=True)
class _Plan:
    request: MonthRequest
    report: Report
    wanted: dict[str, str]  # section -> content digest
    stored: dict[str, StoredNarration | None]
    missing: list[str]  # the sections to ask the model for


def _uses_narrator(services: Services, full_name: str) -> bool:
    config = services.config
    return config.narrator_model is not None and config.narrator_for(full_name) == "llm"


def _plan(services: Services, full_name: str, month: str, force: Collection[str], now: float) -> _Plan:
    config = services.config
    model = config.narrator_model
    assert model is not None
    request = resolve(services, full_name, month, None)
    report = report_for(services, request, prose=False)
    store = services.narrations
    wanted = dict(wanted_sections(report))
    stored = {
        section: store.get(request.repo, month, section, digest, narration.PROMPT_VERSION, model)
        for section, digest in wanted.items()
    }
    missing = [
        section
        for section, record in stored.items()
        if record is None or (record.refused and (section in force or now >= (record.retry_at or 0)))
    ]
    return _Plan(request, report, wanted, stored, missing)


def narrate_once(
    services: Services,
    full_name: str,
    month: str,
    *,
    force: Collection[str] = (),
    client: ChatClient | None = None,
) -> Outcome:
    """Write the missing prose of `month`'s report at its current cutoff (the month's last day once it has
    ended), once. `force`: sections whose refused prose is asked for again before its back-off ends.
    `client`: the endpoint (tests); by default the one TRACKER_LLM_* configures."""
    if not _uses_narrator(services, full_name):
        return Outcome(off=True)
    config = services.config
    model = config.narrator_model
    assert model is not None
    now = time.time()
    plan = _plan(services, full_name, month, force, now)
    store = services.narrations
    repo, report = plan.request.repo, plan.report
    cutoff = plan.request.window.cutoff.isoformat()
    why = {
        section: f"{_reason(record)}; asked again after {iso_utc(math.ceil(record.retry_at or 0))}"
        for section, record in plan.stored.items()
        if record is not None and record.refused and section not in plan.missing
    }
    narrated = [section for section, record in plan.stored.items() if record is not None and not record.refused]
    if not plan.missing:
        store.prune(repo, month, plan.wanted.items())
        return Outcome(cutoff=cutoff, wanted=tuple(plan.wanted), narrated=tuple(narrated), why=why)
    numbers = [
        number
        for s in report.sections
        if s.id in plan.missing
        for c in narration.narrated_changes(s)
        for number in c.numbers
    ]

    def waiting_for_github(until: float) -> Outcome:
        return Outcome(
            cutoff=cutoff, wanted=tuple(plan.wanted), narrated=tuple(narrated), why=why,
            retry_at=until, waiting_for="GitHub",
        )  # fmt: skip

    # The commit subjects are part of the input: a GitHub rate limit is waited for (tracker.github.retry).
    quota = services.quota()
    blocked = held_back(quota)
    if blocked:
        return waiting_for_github(blocked)
    try:
        with services.github(full_name) as github:
            commits = commit_messages(github, full_name, numbers, report.snapshot.window)
    except RateLimited as exc:
        log.warning("narrator: %s %s: %s; asked again then", full_name, month, exc, extra={"repository": full_name})
        return waiting_for_github(rate_limited(exc, quota))
    except (Unavailable, BadAnswer) as exc:  # no date to wait for: a GitHub away or broken must not stop the prose
        log.warning(
            "narrator: %s %s: GitHub could not give commit subjects (%s); writing without commit subjects",
            full_name,
            month,
            exc,
            extra={"repository": full_name},
        )
        commits = {}
    chat = client or _client(services)
    answered: list[str] = []
    error: str | None = None
    retry_at: float | None = None
    try:
        for section in plan.missing:  # one at a time: each record carries its own tokens
            if retry_at is not None:  # rate limited: the rest waits for then too
                why[section] = "rate_limited"
                continue
            result = narrate(
                report,
                chat,
                commits=commits,
                glossary=config.glossary_for(repo),
                sections=[section],
                budget=services.settings.llm_prompt_budget,
            )
            store.spend(repo, month, model, Spent(result.requests, result.prompt_tokens, result.completion_tokens))
            described = result.sections[0]
            fallbacks = tuple(f.as_dict() for f in result.fallbacks)
            reason = "; ".join(f["reason"] for f in fallbacks)
            if any(f["reason"] == "rate_limited" for f in fallbacks):
                # The endpoint said when to come back (or not: then in a minute); the sections left read
                # deterministically until then.
                retry_at = time.time() + (result.retry_after if result.retry_after is not None else LLM_RETRY)
                why[section] = "rate_limited"
                continue
            if result.error is not None:  # the endpoint failed: nothing stored, asked again next time
                error = result.error
                why[section] = reason
                continue
            record = StoredNarration(
                repo=repo,
                month=month,
                section=section,
                content=plan.wanted[section],
                prompt_version=result.prompt_version,
                model=model,
                english=described.english,
                chinese=described.chinese,
                fallbacks=fallbacks,
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
                requests=result.requests,
            )
            previous = plan.stored[section]
            if record.refused and previous is not None and previous.refused:
                record = refused_again(previous, record)
            store.put(record)
            answered.append(section)
            if record.refused:
                why[section] = f"{reason}; asked again after {iso_utc(math.ceil(record.retry_at or 0))}"
            else:
                narrated.append(section)
    finally:
        if client is None:
            chat.close()
    if answered:
        services.state.bump(repo, month)
    store.prune(repo, month, plan.wanted.items())
    if error is not None:
        store.failed(repo, month, error)
        log.warning(
            "narrator: %s %s: the endpoint failed (%s); the sections it did not write read deterministically",
            full_name,
            month,
            error,
            extra={"repository": full_name},
        )
    elif answered:
        store.reached()
    order = list(plan.wanted)
    return Outcome(
        cutoff=cutoff,
        wanted=tuple(order),
        narrated=tuple(sorted(narrated, key=order.index)),
        why={section: why[section] for section in order if section in why},
        answered=tuple(answered),
        asked=True,
        error=error,
        retry_at=retry_at,
        waiting_for="the model" if retry_at is not None else "",
    )


def _reason(record: StoredNarration) -> str:
    return record.fallbacks[-1].get("reason", "refused") if record.fallbacks else "refused"


def narrate_month(services: Services, full_name: str, month: str, client: ChatClient | None = None) -> str:
    """The job: `narrate_once`, re-scheduled at the moment a rate limit gives; then, the run finished, say
    so to a finalisation waiting for it, and re-finalise a record frozen without the prose written since."""
    outcome = narrate_once(services, full_name, month, client=client)
    if outcome.retry_at is not None:
        enqueue_narrate(services.github_queue, full_name, month, at=outcome.retry_at)
        return outcome.said()
    if services.redis is not None:
        services.redis.set(_finished_key(full_name, month), repr(time.time()), ex=_MARKER_TTL)
    late = refinalize_if_late(services, full_name, month, outcome)
    return outcome.said() + (f"; {late}" if late else "")


def narrate_until(
    services: Services,
    full_name: str,
    month: str,
    *,
    force: Collection[str] = (),
    deadline: float = math.inf,
    say: Callable[[str], None] = lambda _: None,
    sleep: Callable[[float], None] = time.sleep,
) -> Outcome:
    """`narrate_once` in the terminal (no queue to re-schedule on): a rate limit, the model's or GitHub's,
    is slept through and the sections left are asked for then, unless its end is past `deadline` (epoch
    seconds). `force`: as in `narrate_once`, for the sections not answered yet."""
    outcome = narrate_once(services, full_name, month, force=force)
    forced = set(force) - set(outcome.answered)
    while outcome.retry_at is not None and outcome.retry_at <= deadline:
        say(f"{outcome.waiting_for} rate-limits the narrator: waiting until {iso_utc(math.ceil(outcome.retry_at))}")
        sleep(max(0.0, outcome.retry_at - time.time()))
        outcome = narrate_once(services, full_name, month, force=forced)
        forced -= set(outcome.answered)
    return outcome


def _client(services: Services) -> ChatClient:
    settings = services.settings
    assert settings.llm_base_url is not None and settings.llm_model is not None
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key is not None else None
    return ChatClient(
        settings.llm_base_url,
        key,
        settings.llm_model,
        timeout=settings.llm_timeout,
        temperature=settings.llm_temperature,
    )


def refinalize_if_late(services: Services, full_name: str, month: str, outcome: Outcome) -> str:
    """Add a revision of the month's record when it was frozen (at the cutoff `outcome` narrated) while
    sections had no prose that have some now: what it did, or "" when nothing was due."""
    if outcome.off or not outcome.narrated:
        return ""
    record = services.records.latest(full_name, month)
    if record is None or record.cutoff != outcome.cutoff:
        return ""
    lacking = record.pending.get("narration") or []
    if not set(lacking) & set(outcome.narrated):
        return ""
    try:
        revised, created = finalize(
            services,
            full_name,
            month,
            force=True,
            trigger="narrator",
        )
    except RecordTaken:  # another finalisation stored the next revision meanwhile: it has the prose
        return ""
    metrics.finalized()
    published = publish(services, revised.full_name, revised.month)
    return f"recorded revision {revised.revision} with the narrator's prose" + (f"; {published}" if published else "")


# A finalisation (workers.jobs.finalize_month) and the narration it waits for meet in Redis: the moment it
# asked for the month's narration, and the moment a narrate job last finished a run of it (prose, refusals
# or a failure of the endpoint; a run re-scheduled behind a rate limit has not finished).
_ASKED = "tracker:narrate-asked:{repo}:{month}"
_FINISHED = "tracker:narrate-finished:{repo}:{month}"
_MARKER_TTL = 24 * 3600


def _finished_key(full_name: str, month: str) -> str:
    return _FINISHED.format(repo=full_name.lower(), month=month)


def narration_settled(services: Services, full_name: str, month: str) -> bool:
    """For a finalisation, which waits (re-scheduling itself, up to its deadline) while this is False:
    whether the month's narration is done, that is every section has its prose or a refusal not due again,
    or a narrate job finished a run since the finalisation asked for one. The first call that finds
    sections to narrate asks for a run (a narrate job on the github queue). Needs Redis."""
    if not _uses_narrator(services, full_name):
        return True
    redis = services.require_redis()
    asked_key = _ASKED.format(repo=full_name.lower(), month=month)
    asked = redis.get(asked_key)
    if asked is None:
        if not _plan(services, full_name, month, (), time.time()).missing:
            return True
        redis.set(asked_key, repr(time.time()), ex=_MARKER_TTL)
        enqueue_narrate(services.github_queue, full_name, month)
        return False
    finished = redis.get(_finished_key(full_name, month))
    return finished is not None and float(finished) >= float(asked)


# How often each month a repository narrates is looked at again (its content may have changed).
NARRATE_EVERY = 3600
_LAST = "tracker:narrate-last:{repo}:{month}"


def narrations_due(services: Services) -> int:
    """Queue the narrator for the current month of every repository that uses it, and for the previous
    month while it has no record yet (its final report) or its record lacks prose, at most once an hour
    each. Returns how many."""
    config = services.config
    if config.narrator_model is None or services.redis is None:
        return 0
    queued = 0
    for full_name in services.state.repository_names():
        if config.narrator_for(full_name) != "llm":
            continue
        current_month = Month.containing(today_in(config.timezone_for(full_name)))
        months = [str(current_month)]
        previous = str(Month.containing(current_month.first_day - timedelta(days=1)))
        record = services.records.latest(full_name, previous)
        if record is None or record.pending.get("narration"):
            months.append(previous)
        for month in months:
            key = _LAST.format(repo=full_name.lower(), month=month)
            if services.redis.set(key, "1", nx=True, ex=NARRATE_EVERY):
                enqueue_narrate(services.github_queue, full_name, month)
                queued += 1
    return queued
