"""The language-model narrator's job: write the prose of a month's report at its current cutoff.

For each section whose input (tracker.core.narration; its content digest) has no stored prose for this
prompt version and model, the narrator asks the model (tracker.llm.narrator) and stores what it got:
validated prose in both languages, or the fallback and why, with the tokens it cost. A section already
described is not asked again, so a refresh pays only for what changed. Then the month's version moves,
so that cached renders are replaced, and the month's older prose is pruned.

It runs in a worker, never in a request: a request renders the latest stored prose, or the
deterministic text while there is none. A rate limit ends the job with the sections it could not write
left for a job re-scheduled at the moment the endpoint gives (they read deterministically meanwhile);
other failures of the endpoint leave them for the next hourly run. The input includes the subjects of
the PRs' commits inside the window, read from GitHub (tracker.github.commits) for the sections to write;
a GitHub rate limit re-schedules the job at GitHub's reset before the model is asked anything; a GitHub
that cannot be reached leaves the commit subjects out. Every request's
tokens are added to the month's bill (`NarrationStore.spend`), which pruning never touches.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from tracker.core import narration
from tracker.core.window import Month, iso_utc, today_in
from tracker.github.client import RateLimited, Unavailable
from tracker.github.commits import commit_messages
from tracker.llm.client import ChatClient
from tracker.llm.narrator import narrate
from tracker.queue import enqueue_narrate
from tracker.reports.loading import report_for, resolve
from tracker.reports.prose import wanted_sections
from tracker.services import Services
from tracker.store.narrations import NarrationStore, Spent, StoredNarration
from workers.runtime import current

log = logging.getLogger(__name__)


def narrate_month(full_name: str, month: str, client: ChatClient | None = None) -> str:
    """Write the missing prose of `month`'s report at its current cutoff (the month's last day once it
    has ended). `client`: the endpoint (tests); by default the one TRACKER_LLM_* configures."""
    services = current()
    config = services.config
    model = config.narrator_model
    if model is None or config.narrator_for(full_name) != "llm":
        return "the narrator is off for this repository"
    request = resolve(services.state, config, full_name, month, None)
    report = report_for(services.state, config, request, prose=False)
    store = NarrationStore(services.state.engine)
    repo = request.repo
    wanted = wanted_sections(report)
    missing = [
        section
        for section, digest in wanted
        if store.get(repo, month, section, digest, narration.PROMPT_VERSION, model) is None
    ]
    if not missing:
        store.prune(repo, month, wanted)
        return "every section already narrated"
    numbers = [number for s in report.sections if s.id in missing for c in s.changes for number in c.numbers]
    try:
        with services.github(full_name) as github:
            commits = commit_messages(github, full_name, numbers, report.snapshot.window)
    except RateLimited as exc:  # the commit subjects are part of the input: wait for them
        enqueue_narrate(services.github_queue, full_name, month, at=exc.retry_at)
        log.warning("narrator: %s %s: %s; asked again then", full_name, month, exc, extra={"repository": full_name})
        return f"waiting for GitHub until {iso_utc(int(exc.retry_at))}"
    except Unavailable as exc:  # no date to wait for: a GitHub that stays away must not stop the prose
        log.warning(
            "narrator: %s %s: GitHub unavailable (%s); writing without commit subjects",
            full_name,
            month,
            exc,
            extra={"repository": full_name},
        )
        commits = {}
    chat = client or _client(services)
    digests = dict(wanted)
    written = 0
    retry_at: float | None = None
    try:
        for section in missing:  # one at a time: each record carries its own tokens
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
            if any(f["reason"] == "rate_limited" for f in fallbacks):
                # The endpoint said when to come back (or not: then in a minute); the sections left read
                # deterministically until then.
                retry_at = time.time() + (result.retry_after or LLM_RETRY)
                break
            if described.english is None and any(f["reason"] in _TRANSIENT for f in fallbacks):
                continue  # the endpoint was unavailable: asked again next time, deterministic meanwhile
            store.put(
                StoredNarration(
                    repo=repo,
                    month=month,
                    section=section,
                    content=digests[section],
                    prompt_version=result.prompt_version,
                    model=model,
                    english=described.english,
                    chinese=described.chinese,
                    fallbacks=fallbacks,
                    prompt_tokens=result.prompt_tokens,
                    completion_tokens=result.completion_tokens,
                    requests=result.requests,
                )
            )
            written += 1
    finally:
        if client is None:
            chat.close()
    services.state.bump(repo, month)
    store.prune(repo, month, wanted)
    said = f"{written} of {len(wanted)} sections narrated"
    if retry_at is not None:
        enqueue_narrate(services.github_queue, full_name, month, at=retry_at)
        said += f"; rate limited, again at {iso_utc(int(retry_at))}"
    return said


# When the endpoint rate-limits without saying for how long: seconds to wait.
LLM_RETRY = 60.0
_TRANSIENT = frozenset({"timeout", "rate_limited", "connection", "http"})


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


# How often each month a repository narrates is looked at again (its content may have changed).
NARRATE_EVERY = 3600
_LAST = "tracker:narrate-last:{repo}:{month}"


def narrations_due(services: Services) -> int:
    """Queue the narrator for the current month of every repository that uses it, and for the previous
    month while it has no record yet (its final report), at most once an hour each. Returns how many."""
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
        if services.records.latest(full_name, previous) is None:
            months.append(previous)
        for month in months:
            key = _LAST.format(repo=full_name.lower(), month=month)
            if services.redis.set(key, "1", nx=True, ex=NARRATE_EVERY):
                enqueue_narrate(services.github_queue, full_name, month)
                queued += 1
    return queued
