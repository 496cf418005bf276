"""Loading a month: resolve what was asked (repository, month, cutoff), read the month's state in one
pass, and hand plain data to the pure core (snapshot, report model)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from redis import Redis

from tracker.core import memo
from tracker.core.coverage import Coverage
from tracker.core.report import Report, build_report
from tracker.core.since import Since, since_of
from tracker.core.snapshot import MonthSnapshot, build_snapshot
from tracker.core.window import month_window, resolve_window, today_in
from tracker.narration.prose import with_prose
from tracker.reports.collector import collector_paused
from tracker.reports.coverage import window_coverage_of
from tracker.reports.digests import KeptDigest, cached_fold
from tracker.reports.groupings import SharedGroupings
from tracker.reports.render import json_bytes
from tracker.reports.request import MonthRequest, ReportServices
from tracker.store.month_digest import MonthDigest
from tracker.store.month_state import MonthInputs

# An unknown repository's message names at most this many of the known ones.
_NAMED = 20


class UnknownRepository(LookupError):
    """A repository the ledger has no delivery of. Raised by `resolve`, it carries the repository
    asked for (`repo`), the repositories the ledger knows (`known`, private ones included: an HTTP
    answer to anyone but the admin filters them, see `describe`) and the ledger it looked in
    (`ledger`, its URL with any password hidden); `str()` names them all, as `tracker render` shows."""

    def __init__(
        self, message: str, *, repo: str | None = None, known: Sequence[str] = (), ledger: str | None = None
    ) -> None:
        super().__init__(message)
        self.repo = repo
        self.known = tuple(known)
        self.ledger = ledger

    @classmethod
    def in_ledger(cls, repo: str, known: Sequence[str], ledger: str | None) -> UnknownRepository:
        return cls(unknown_repository_message(repo, known, ledger), repo=repo, known=known, ledger=ledger)

    def describe(self, known: Sequence[str]) -> str:
        """The message for a reader who may see only `known` of the repositories, and not where the
        ledger is (an HTTP answer)."""
        if self.repo is None:
            return str(self)
        return unknown_repository_message(self.repo, known, None)


def unknown_repository_message(repo: str, known: Sequence[str], ledger: str | None) -> str:
    """`no deliveries have been received for <repo>`, then where it looked and what it knows:
    an empty ledger is most often another one than the service writes to (another data directory)."""
    where = f" in the ledger {ledger}" if ledger else ""
    if not known:
        if ledger:
            return (
                f"no deliveries have been received for {repo}{where}, which has none for any repository: "
                "is it the ledger the service writes to (TRACKER_DATA_DIR, TRACKER_DATABASE_URL)?"
            )
        return f"no deliveries have been received for {repo}, nor for any repository yet"
    names = ", ".join(known[:_NAMED]) + (f" and {len(known) - _NAMED} more" if len(known) > _NAMED else "")
    return f"no deliveries have been received for {repo}{where}; known repositories: {names}"


def resolve(
    services: ReportServices, repo: str, month: str, cutoff: str | None, today: date | None = None
) -> MonthRequest:
    """`repo` (any case) for `month` (`YYYY-MM` or `current`) at `cutoff` (`YYYY-MM-DD` or None).
    Raises UnknownRepository (naming the known repositories and the ledger), or window.WindowError
    for a bad month or cutoff."""
    state = services.state
    stored = state.repository_name(repo)
    if stored is None:
        raise UnknownRepository.in_ledger(repo, state.repository_names(), services.ledger.shown_url())
    tz = services.config.timezone_for(stored)
    return MonthRequest(stored, resolve_window(month, cutoff, tz, today if today is not None else today_in(tz)))


def report_for(
    services: ReportServices,
    request: MonthRequest,
    *,
    prose: bool = True,
    cache: Redis | None = None,
    digest: MonthDigest | KeptDigest | None = None,
    evidence: bool = True,
) -> Report:
    """The report model of the month at the cutoff: one read, then pure computation; with the narrator's
    stored prose when the repository uses it (`prose=False`: the deterministic report, which the
    narrator describes). With `cache`, the month's snapshot comes from its digest when a worker kept one
    for the month as it is (tracker.reports.digests), and each section's themes, grouped and named, are read
    from Redis when any process computed them before, and kept there when computed (tracker.reports.groupings).
    `digest`: the month's digest when the caller holds it already (a worker that just read it, or that reads
    each cutoff of a month from Redis).
    `evidence=False`: for a document that does not show each PR's evidence (the Markdown and the HTML), the
    snapshot from a digest leaves it empty rather than parse it."""
    window, config = request.window, services.config
    coverage = window_coverage_of(services.history, request.repo, window)
    folded = (
        digest.fold_at(request.repo, window, coverage, evidence=evidence)
        if digest is not None
        else cached_fold(services, cache, request, coverage, evidence=evidence)
    )
    if folded is not None:
        snapshot, paths, known = folded
    else:
        inputs = services.state.month_inputs(request.repo, str(window.month), window.end)
        snapshot, paths, known = _snapshot(services, request, inputs, coverage), inputs.paths, memo.NOTHING
    report = build_report(snapshot, paths, config.themes_for(request.repo), themer=SharedGroupings(cache), known=known)
    return with_prose(report, services.narrations, config) if prose else report


def since_for(
    services: ReportServices, request: MonthRequest, since: date, report: Report, cache: Redis | None = None
) -> Since:
    """What changed in the month from the cutoff `since` (a day of the month not after the request's cutoff)
    to the request's, whose report is `report`: the earlier cutoff's report is built like any (from the
    month's digest when a worker kept one), its snapshot without evidence, which the difference never reads."""
    window = request.window
    if since == window.cutoff:
        return since_of(report, report)
    earlier = MonthRequest(request.repo, month_window(window.month, since, window.timezone))
    return since_of(report_for(services, earlier, cache=cache, evidence=False), report)


def snapshot_for(services: ReportServices, request: MonthRequest) -> MonthSnapshot:
    """The snapshot read from the month's tables (no digest): what a month's record and its readiness
    count. A big month's read makes a few hundred thousand objects, so the cyclic collector is held back
    meanwhile, as for a report (`collector.collector_paused`)."""
    window = request.window
    with collector_paused():
        inputs = services.state.month_inputs(request.repo, str(window.month), window.end, bodies=False, paths=False)
        return _snapshot(services, request, inputs)


def _snapshot(
    services: ReportServices, request: MonthRequest, inputs: MonthInputs, coverage: Coverage | None = None
) -> MonthSnapshot:
    return build_snapshot(
        request.repo,
        request.window,
        inputs.timelines,
        inputs.versions,
        inputs.verdicts,
        services.config.rules_for(request.repo),
        inputs.unavailable,
        coverage if coverage is not None else window_coverage_of(services.history, request.repo, request.window),
    )


def load_snapshot(
    services: ReportServices, repo: str, month: str, cutoff: str | None, today: date | None = None
) -> MonthSnapshot:
    """The snapshot of `repo` for `month` at `cutoff` (see `resolve`)."""
    return snapshot_for(services, resolve(services, repo, month, cutoff, today))


def snapshot_json(snapshot: MonthSnapshot) -> str:
    """The snapshot as JSON text; the same state always gives the same bytes."""
    return json_bytes(snapshot.as_dict()).decode("utf-8")
