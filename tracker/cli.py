"""The `tracker` command."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import signal
import sys
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import click

from tracker import __version__, logs
from tracker.settings import Settings, SettingsError, load_settings

if TYPE_CHECKING:
    from tracker.services import Services

log = logging.getLogger("tracker")


P = ParamSpec("P")
R = TypeVar("R")


def with_settings(command: Callable[Concatenate[Settings, P], R]) -> Callable[P, R]:
    """Read the settings once and hand them to the command; a settings error anywhere in the command
    (a missing secret, a bad config file, no Redis) is one line that says what to do, not a traceback."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(load_settings(), *args, **kwargs)
        except Exception as exc:
            _raise_explained(exc)
            raise

    return wrapper


def with_services(
    *, redis: bool = True, outdated_ok: bool = False
) -> Callable[[Callable[Concatenate[Services, P], R]], Callable[P, R]]:
    """Build the one services object from the settings (with a Redis connection when the command
    needs the queue), hand it to the command, close it afterwards. Expected errors, in the set-up or
    in the command (a bad config, an unreachable database or Redis, GitHub refusing the token), are
    one line and an exit code (`_explained`)."""

    def decorate(command: Callable[Concatenate[Services, P], R]) -> Callable[P, R]:
        @functools.wraps(command)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            from tracker.services import Services

            try:
                services = Services.from_settings(load_settings(), redis=redis, outdated_ok=outdated_ok)
            except Exception as exc:
                _raise_explained(exc)  # a bad config, an unreachable database: one line
                raise
            try:
                return command(services, *args, **kwargs)
            except Exception as exc:
                _raise_explained(exc)
                raise
            finally:
                services.close()

        return wrapper

    return decorate


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT (Ctrl-C), for commands that run until told to stop."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    return stop


# Exit codes. 0: done. 1: something failed or did not answer (the database, Redis, GitHub, the port
# `tracker run` wants, a part of `tracker run` that kept dying), or the command refused what it was
# asked (an unknown repository, a month that has not ended). 2: the settings, TRACKER_CONFIG or the
# command line must change (click's own usage errors are 2 as well).
FAILED, USAGE = 1, 2


class Failure(click.ClickException):
    """An expected problem: one line (`Error: …` on stderr), exit code 1."""

    def __init__(self, message: str) -> None:
        super().__init__(logs.one_line(message))


class UsageFailure(Failure):
    """What the settings, the config file or the options must change: exit code 2."""

    exit_code = USAGE


def _failure(message: str, exit_code: int = FAILED) -> Failure:
    return UsageFailure(message) if exit_code == USAGE else Failure(message)


def _explained(exc: BaseException) -> click.ClickException | None:
    """The one line and exit code for an expected error, or None for anything else (a bug keeps its
    traceback). Only the modules already loaded are asked about their exceptions."""
    if isinstance(exc, click.ClickException):
        return exc
    if isinstance(exc, SettingsError):
        return _failure(str(exc), USAGE)
    loaded = sys.modules
    if "sqlalchemy" in loaded:
        from sqlalchemy.exc import ArgumentError, InterfaceError, NoSuchModuleError, OperationalError

        if isinstance(exc, ArgumentError | NoSuchModuleError):
            return _failure(f"TRACKER_DATABASE_URL is not a database URL the tracker can use ({exc})", USAGE)
        if isinstance(exc, OperationalError | InterfaceError):
            reason = str(exc.orig).strip().splitlines()[0] if exc.orig is not None else type(exc).__name__
            return _failure(
                f"the database{_database_url()} cannot be used ({reason}): check that it runs and that "
                "TRACKER_DATABASE_URL (or TRACKER_DATA_DIR) names it",
                FAILED,
            )
    if "redis" in loaded:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        if isinstance(exc, RedisConnectionError | RedisTimeoutError):
            return _failure(
                f"Redis does not answer ({type(exc).__name__}: {exc}): start it, or fix REDIS_URL "
                "(unset, `tracker run` starts its own)",
                FAILED,
            )
    if "tracker.github.client" in loaded:
        from tracker.github.client import GitHubError, RequestRefused

        if isinstance(exc, RequestRefused) and exc.status == 401:
            return _failure(f"{exc}: bad credentials, check GITHUB_TOKEN (or the GitHub App's settings)", USAGE)
        if isinstance(exc, GitHubError):
            return _failure(str(exc), FAILED)
    if "httpx" in loaded:
        import httpx

        if isinstance(exc, httpx.HTTPError):
            return _failure(f"an HTTP request failed ({type(exc).__name__}: {exc})", FAILED)
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return _failure(f"{exc.filename}: {exc.strerror}", FAILED)
    return None


def _raise_explained(exc: BaseException) -> None:
    """Raise the one-line form of an expected error (chained to it, for -v); return for anything else."""
    explained = _explained(exc)
    if explained is not None and explained is not exc:
        raise explained from exc


def _database_url() -> str:
    """` at <url>` of the ledger, its password hidden; empty when the settings cannot say."""
    try:
        from sqlalchemy.engine import make_url

        return " at " + make_url(load_settings().resolved_database_url).render_as_string(hide_password=True)
    except Exception:
        return ""


class _Tracker(click.Group):
    """The `tracker` group: every command's expected errors are one line and an exit code
    (`_explained`); with -v the traceback comes first."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.Abort, click.UsageError):
            raise
        except Exception as exc:
            explained = _explained(exc)
            if explained is None:
                raise  # not expected: Python's traceback
            if logs.verbose():
                traceback.print_exception(exc)
            if explained is exc:
                message = exc.format_message()
                if "\n" not in message:
                    raise
                explained = _failure(message, exc.exit_code)
            raise explained from exc


@click.group(cls=_Tracker)
@click.version_option(__version__, prog_name="tracker")
@click.option("-v", "--verbose", is_flag=True, help="Log debug messages, in every process; tracebacks of errors.")
def main(verbose: bool) -> None:
    """Monthly activity tracker for GitHub repositories."""
    logs.configure(verbose)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
@click.option("--workers", default=2, show_default=True, type=click.IntRange(min=0), help="RQ worker processes.")
@click.option(
    "--web-processes", default=2, show_default=True, type=click.IntRange(min=1), help="gunicorn worker processes."
)
@click.option("--sweep-every", default=60.0, show_default=True, type=float, help="Seconds between sweeps.")
@click.option(
    "--worker-nice",
    default=10,
    show_default=True,
    type=click.IntRange(0, 19),
    help="Each worker's --nice: on one machine, webhook answers come before background work.",
)
@with_settings
def run(
    settings: Settings, host: str, port: int, workers: int, web_processes: int, sweep_every: float, worker_nice: int
) -> None:
    """Start web, workers, sweep (and the embedded Redis when REDIS_URL is unset).

    First it checks, starting nothing, the settings, TRACKER_CONFIG, the database, Redis (when
    REDIS_URL is set) and the port: a problem is one line saying what to fix (exit code 2 for the
    settings and options, 1 for what does not answer or is taken). A part that keeps dying within
    seconds of its start is restarted after 1, 2, 4, 8 s, then everything stops (exit code 1)."""
    from tracker.supervisor import CannotStart
    from tracker.supervisor import run as supervise

    try:
        code = supervise(settings, host, port, workers, web_processes, sweep_every, worker_nice)
    except CannotStart as exc:
        raise _failure(str(exc), exc.exit_code) from exc
    sys.exit(code)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--processes", default=2, show_default=True, type=int, help="gunicorn worker processes.")
@with_settings
def web(settings: Settings, host: str, port: int, processes: int) -> None:
    """Serve the webhook and the API with gunicorn."""
    from tracker.supervisor import CannotStart, check_port
    from tracker.web.app import create_app
    from tracker.web.context import services
    from tracker.web.server import WebServer

    try:
        check_port(host, port)  # one line now, rather than gunicorn's retries and traceback
    except CannotStart as exc:
        raise _failure(str(exc), exc.exit_code) from exc
    app = create_app(settings)  # fail here, with a clear message, rather than in every gunicorn worker
    with app.app_context():
        services().close()  # each gunicorn worker builds its own after the fork
    WebServer(settings, host, port, processes).run()


# The queues of `tracker worker --queue`, in the order a worker takes their jobs (workers.runtime.QUEUES;
# named here too, since the CLI does not import the queue's modules until a command needs them).
WORKER_QUEUES = ("deliveries", "records", "github")


@main.command()
@click.option("--burst", is_flag=True, help="Stop when the queue is empty.")
@click.option(
    "--nice",
    default=0,
    show_default=True,
    type=click.IntRange(0, 19),
    help="Lower this process's CPU priority by N (os.nice), below web processes on the same machine.",
)
@click.option(
    "--queue",
    "queues",
    multiple=True,
    type=click.Choice(WORKER_QUEUES),
    help="Take jobs from this queue only (repeat for several; default: all, deliveries first, GitHub last).",
)
@with_settings
def worker(settings: Settings, burst: bool, nice: int, queues: tuple[str, ...]) -> None:
    """Process deliveries from the queue (RQ); while Redis is unreachable, wait for it."""
    from tracker.queue import WORKER_REDIS
    from tracker.services import Services
    from workers.runtime import lower_cpu_priority, work

    # The webhook must answer within GitHub's 10 s whatever the backlog; the work itself can wait for
    # a free core (nothing is lost: the ledger holds it).
    lower_cpu_priority(nice)

    # The long socket timeout a blocking dequeue needs (tracker.queue.WORKER_REDIS).
    services = Services.from_settings(settings, redis_timeouts=WORKER_REDIS)
    try:
        if burst:
            _require_redis(services)
        work(services, burst=burst, queues=queues or WORKER_QUEUES)
    finally:
        services.close()


@main.command("sweep")
@click.option("--every", default=0.0, type=float, help="Repeat every N seconds (0: once).")
@click.option("--grace", default=60.0, show_default=True, type=float, help="Skip deliveries younger than this.")
@with_services()
def sweep_command(services: Services, every: float, grace: float) -> None:
    """Re-enqueue accepted deliveries that were never processed."""
    from redis.exceptions import RedisError

    from workers.sweep import sweep, sweep_forever

    if every <= 0:
        _require_redis(services)
        try:
            swept = sweep(services, grace)
        except RedisError as exc:
            raise click.ClickException(f"Redis failed during the sweep ({type(exc).__name__}: {exc})") from exc
        click.echo(f"found {swept} pending deliveries and queued their processing")
        return
    sweep_forever(services, every, stop_on_signals(), grace)  # waits for Redis while it is unreachable


@main.command()
@with_settings
def redis(settings: Settings) -> None:
    """Run the embedded Redis server in the foreground (for `tracker web` and `tracker worker`)."""
    from tracker.embedded_redis import EmbeddedRedis

    server = EmbeddedRedis(settings.data_dir)
    if server.is_running():
        raise click.ClickException(f"an embedded Redis already answers on {server.socket}")
    server.start()
    click.echo(f"embedded Redis on {server.url}; export REDIS_URL={server.url} or leave it unset")
    stop = stop_on_signals()
    try:
        while not stop.wait(0.5):
            server.keep_alive()  # a server that died starts again from its append-only file
    finally:
        server.stop()


@main.command()
@with_services(redis=False, outdated_ok=True)
def rebuild(services: Services) -> None:
    """Drop every derived table and re-derive it from the raw ledger (stop the workers first)."""
    from tracker.store.rebuild import rebuild as run_rebuild

    counts = services.ledger.counts()
    with click.progressbar(length=counts.received, label="rebuilding", file=sys.stderr) as bar:
        processed, failed, heads = run_rebuild(services.ledger, services.state, services.config, progress=bar.update)
    click.echo(f"rebuilt from {processed} deliveries; {failed} failed; {heads} heads reclassified")


@main.command()
@with_settings
def migrate(settings: Settings) -> None:
    """Upgrade the database's schema to this release's (stop the tracker's processes first). Running it
    again changes nothing; a ledger of the release before migrations is checked and adopted, never recreated;
    one of an earlier release keeps its deliveries and everything else not derived, and is rebuilt from them."""
    from tracker.config import load_config
    from tracker.store.database import derived_schema_outdated, open_engine, upgraded
    from tracker.store.rebuild import upgrade

    engine = open_engine(settings.resolved_database_url)
    try:
        done = upgrade(engine, lambda: load_config(settings))
        outdated = derived_schema_outdated(engine)
    finally:
        engine.dispose()
    where = engine.url.render_as_string(hide_password=True)
    if done.carried is not None:
        click.echo(upgraded(engine, done, "rebuilt the derived tables"))
    elif done.created:
        click.echo(f"created the schema at {where}: revision {done.after}")
    elif done.before == done.after:
        click.echo(f"the schema at {where} is up to date: revision {done.after}")
    else:
        adopted = " (the release before migrations made it: checked, then stamped)" if done.adopted else ""
        click.echo(f"upgraded the schema at {where} from revision {done.before or 'none'} to {done.after}{adopted}")
    if outdated:
        click.echo("its derived tables come from an older release: `tracker run` rebuilds them (or `tracker rebuild`)")


@main.command()
@click.option("--repo", required=True, help="owner/name")
@click.option("--month", default=None, help="A whole month, YYYY-MM (up to now if it is running).")
@click.option("--since", default=None, help="From this day (YYYY-MM-DD, repository time zone) to now.")
@click.option(
    "--files",
    type=click.Choice(["daily", "end"]),
    default="daily",
    show_default=True,
    help="Fetch the files of each PR's head at every day's end (every cutoff complete at once), or only at "
    "the range's end (about one request per PR fewer; the service fetches the others in the background).",
)
@with_services(redis=False)
def backfill(services: Services, repo: str, month: str | None, since: str | None, files: str) -> None:
    """Read a repository's history from GitHub's REST API: every PR with activity in the range, its
    timeline and the files its reports need. Interrupted, it resumes where it stopped; rate limits
    are waited out. Needs GITHUB_TOKEN or a GitHub App (a public repository works without, slowly)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from tracker.core.repository import check_full_name
    from tracker.core.window import WindowError, iso_utc
    from tracker.github.client import GitHubError
    from tracker.history.derive import BACKFILL, history_range
    from tracker.history.github import read_history, wait_for
    from tracker.history.jobs import target
    from tracker.history.store import SAMPLE_REFUSAL

    try:
        full_name = check_full_name(repo)
    except ValueError as exc:
        raise click.ClickException(f"--repo {exc}") from exc
    try:
        start, end = history_range(month, since, services.config.timezone_for(full_name), int(time.time()))
    except WindowError as exc:
        raise click.ClickException(str(exc)) from exc
    if services.history.is_sample(full_name):
        raise click.ClickException(SAMPLE_REFUSAL.format(full_name))
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, transient=False) as bar:
        task = bar.add_task(f"backfilling {full_name}", total=None)

        class Shown:
            def total(self, count: int) -> None:
                bar.update(task, total=count)

            def advance(self, number: int, outcome: str) -> None:
                bar.advance(task)

            def waiting(self, until: float, kind: str) -> None:
                bar.console.print(f"GitHub's {kind} rate limit: waiting until {iso_utc(int(until))}")

        try:
            with services.github(full_name) as client:
                run = read_history(
                    client,
                    services.history,
                    services.heads,
                    target(services, full_name, start, end, files),
                    BACKFILL,
                    progress=Shown(),
                    wait=wait_for,
                )
        except GitHubError as exc:  # a refusal, an outage, or an answer the client will not use (BadAnswer)
            raise Failure(f"{exc} (run the same command again to resume)") from exc
    click.echo(
        f"backfilled {full_name} from {iso_utc(start)} to {iso_utc(end)}: {run.done} PRs, "
        f"{run.requests} GitHub requests ({run.not_modified} answered 304 Not Modified)"
        + (f"; {run.detail}" if run.detail else "")
    )


@main.command("retry-failed")
@with_services()
def retry_failed(services: Services) -> None:
    """Put every failed delivery back on the queue (nothing changes while Redis is unreachable)."""
    from redis.exceptions import RedisError

    from tracker.queue import enqueue_deliveries
    from tracker.store.ledger import FAILED

    _require_redis(services, "nothing was changed")
    # The jobs first, the ledger after: a Redis that fails half-way leaves every delivery failed.
    ids = services.ledger.ids_with_status(FAILED)
    try:
        enqueue_deliveries(services.delivery_queue, ids)
    except RedisError as exc:
        raise click.ClickException(
            f"Redis failed while queueing ({type(exc).__name__}: {exc}): the deliveries stay failed; try again"
        ) from exc
    services.ledger.reset_failed(ids)
    click.echo(f"re-enqueued {len(ids)} failed deliveries")


def _require_redis(services: Services, consequence: str = "") -> None:
    """For commands that do one thing with Redis and end: a Redis that does not answer is one line
    that says so, not a traceback (the long-running `worker` and `sweep --every` wait instead)."""
    from tracker.queue import redis_address, redis_failure

    connection = services.require_redis()
    failure = redis_failure(connection, timeout=2.0)
    if failure is not None:
        consequence = f"; {consequence}" if consequence else ""
        raise click.ClickException(
            f"Redis at {redis_address(connection)} does not answer ({type(failure).__name__}: {failure}){consequence}"
        )


@main.command("render")
@click.option("--repo", required=True, help="owner/name")
@click.option("--month", required=True, help="YYYY-MM or current")
@click.option("--cutoff", default=None, help="YYYY-MM-DD (default: month end, or today)")
@click.option("--lang", default="en", show_default=True, help="en or zh-CN")
@click.option("--format", "fmt", default="md", show_default=True, type=click.Choice(["md", "html", "json"]))
def render_command(repo: str, month: str, cutoff: str | None, lang: str, fmt: str) -> None:
    """Write a report to stdout (the same bytes as /reports/<owner>/<repo>/<month>.<format>)."""
    _print_report(repo, month, cutoff, lang, fmt)


@main.command()
@click.option("--repo", required=True, help="owner/name")
@click.option("--month", required=True, help="YYYY-MM or current")
@click.option("--cutoff", default=None, help="YYYY-MM-DD (default: month end, or today)")
def snapshot(repo: str, month: str, cutoff: str | None) -> None:
    """Print a month's JSON snapshot (the same bytes as the API)."""
    _print_report(repo, month, cutoff, "en", "json")


@main.command()
@click.option("--repo", required=True, help="owner/name")
@click.option("--month", required=True, help="YYYY-MM or current")
@click.option("--cutoff", default=None, help="YYYY-MM-DD (default: none, and the link opens every cutoff of the month)")
@click.option("--expires", default="7d", show_default=True, help="How long the link works: 30m, 12h, 7d, 2w.")
@click.option("--format", "fmt", default="html", show_default=True, type=click.Choice(["html", "md", "json"]))
@click.option("--base-url", default="http://127.0.0.1:8000", show_default=True, help="Where readers reach the tracker.")
@with_settings
def link(settings: Settings, repo: str, month: str, cutoff: str | None, expires: str, fmt: str, base_url: str) -> None:
    """Print a signed link to a month's report that works until it expires (signed with TRACKER_LINK_SECRET).

    The link opens the report of that repository and month (at that cutoff, when one is given) in
    every format and language, also when the repository is private (`public: false`)."""
    from datetime import UTC, datetime

    from tracker.config import load_config
    from tracker.core.repository import InvalidRepositoryName, check_full_name
    from tracker.core.window import WindowError, resolve_window, today_in
    from tracker.web.access import DurationError, link_url, parse_duration, sign_link, utc_text

    secret = settings.require_link_secret()
    config = load_config(settings)
    if not base_url.startswith(("http://", "https://")):
        raise click.BadParameter(f"{base_url!r} is not an http:// or https:// URL", param_hint="--base-url")
    try:
        check_full_name(repo)
    except InvalidRepositoryName as exc:
        raise click.BadParameter(f"{repo!r} {exc}", param_hint="--repo") from exc
    try:
        lifetime = parse_duration(expires)
    except DurationError as exc:
        raise click.BadParameter(str(exc), param_hint="--expires") from exc
    # The month and cutoff as the server will read them, in the repository's time zone: `current`
    # becomes the month it is now, and what the server would refuse is refused here.
    tz = config.timezone_for(repo)
    try:
        window = resolve_window(month, cutoff, tz, today_in(tz))
    except WindowError as exc:
        raise click.ClickException(str(exc)) from exc
    bound = window.cutoff.isoformat() if cutoff else None
    now = datetime.now(UTC)
    token = sign_link(secret, repo, str(window.month), bound, lifetime, now)
    click.echo(link_url(base_url, repo, str(window.month), fmt, token, bound))
    if config.is_public(repo):
        click.echo(f"note: {repo} is public: its reports open without a link", err=True)
    click.echo(f"expires at {utc_text(now + lifetime)}", err=True)


@with_services(redis=False)
def _print_report(services: Services, repo: str, month: str, cutoff: str | None, lang: str, fmt: str) -> None:
    from tracker.core.window import WindowError
    from tracker.records.finalize import served_record
    from tracker.reports.cache import rendered
    from tracker.reports.loading import UnknownRepository, resolve
    from tracker.reports.render import Document, UnknownLanguage, language

    try:
        wanted = resolve(services, repo, month, cutoff)
        record = served_record(services.records, wanted)
        if record is not None:  # a finalised month: its record, byte for byte (as the API serves it)
            text = record.document(fmt, language(lang))
        else:
            text = rendered(services, wanted, Document(fmt, language(lang)))
    except (UnknownRepository, WindowError, UnknownLanguage) as exc:
        raise click.ClickException(str(exc)) from exc
    sys.stdout.buffer.write(text.encode("utf-8"))


@main.command()
@click.option("--repo", default=None, help="owner/name (or --group)")
@click.option("--group", default=None, help="A group's name (`groups:` in TRACKER_CONFIG), instead of --repo.")
@click.option("--month", required=True, help="YYYY-MM")
@click.option("--force", is_flag=True, help="Before the month ends, or again (a new revision; earlier ones stay).")
@click.option(
    "--wait",
    default=None,
    type=float,
    help="Seconds to wait for the month's pending deliveries and files (default: TRACKER_FINALIZE_WAIT).",
)
@with_services(redis=False)
def finalize(
    services: Services, repo: str | None, group: str | None, month: str, force: bool, wait: float | None
) -> None:
    """Freeze a month's final report as its record (and publish it where configured). With --group, a group's
    month: once it has ended and its members with activity are recorded (or --force: members without a record
    are read live)."""
    from tracker.core.window import WindowError
    from tracker.records.finalize import MonthNotEnded, final_request, finalize, readiness
    from tracker.records.publish import FINAL, publish_month
    from tracker.reports.loading import UnknownRepository

    if (repo is None) == (group is None):
        raise click.UsageError("give --repo owner/name or --group NAME (one of them)")
    if group is not None:
        _finalize_group(services, group, month, force)
        return
    assert repo is not None
    try:
        wanted = final_request(services, repo, month, force=force)
        existing = services.records.latest(wanted.repo, str(wanted.window.month))
        if existing is not None and not force:
            click.echo(f"{month} of {wanted.repo} is recorded already (revision {existing.revision}); --force adds one")
            return
        deadline = time.monotonic() + (services.settings.finalize_wait if wait is None else wait)
        while not (waiting := readiness(services, wanted)).ready:
            if time.monotonic() >= deadline:
                click.echo(f"still pending, recorded as such: {waiting.as_dict()}", err=True)
                break
            click.echo(f"waiting for {waiting.as_dict()}", err=True)
            time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
        if services.config.narrator_model is not None and services.config.narrator_for(wanted.repo) == "llm":
            from tracker.narration.jobs import narrate_until

            until = time.time() + max(0.0, deadline - time.monotonic())  # the same deadline, on the wall clock
            say = functools.partial(click.echo, err=True)
            narrated = narrate_until(services, wanted.repo, month, deadline=until, say=say)
            click.echo(f"narrator: {narrated.said()}", err=True)
        record, created = finalize(services, repo, month, force=force, trigger="cli")
    except (UnknownRepository, WindowError, MonthNotEnded) as exc:
        raise click.ClickException(str(exc)) from exc
    owner, name = record.full_name.split("/", 1)
    location = f"/api/v1/repos/{owner}/{name}/months/{record.month}/records"
    state = "recorded" if created else "recorded already"
    click.echo(f"{record.month} of {record.full_name} {state}: revision {record.revision}, {location}")
    if created and services.config.publishing_for(record.full_name).enabled:
        click.echo(publish_month(services, record.full_name, record.month, FINAL))


def _finalize_group(services: Services, name: str, month: str, force: bool) -> None:
    from urllib.parse import quote

    from tracker.core.window import WindowError
    from tracker.records.finalize import MonthNotEnded
    from tracker.records.groups import MembersNotRecorded, finalize_group
    from tracker.records.publish import publish_group
    from tracker.reports.groups import UnknownGroup

    try:
        record, created = finalize_group(services, name, month, force=force, trigger="cli")
    except UnknownGroup as exc:
        known = ", ".join(services.config.groups) or "none are configured (`groups:` in TRACKER_CONFIG)"
        raise click.ClickException(f"no group {str(exc)!r}; the groups: {known}") from exc
    except (WindowError, MonthNotEnded, MembersNotRecorded) as exc:
        raise click.ClickException(str(exc)) from exc
    location = f"/api/v1/groups/{quote(record.name, safe='')}/months/{record.month}/records"
    state = "recorded" if created else "recorded already"
    click.echo(f"{record.month} of the group {record.name} {state}: revision {record.revision}, {location}")
    if not created and not force:
        click.echo("--force adds a revision", err=True)
    if created and (published := publish_group(services, record.name, record.month)):
        click.echo(published)


@main.command()
@click.option("--repo", required=True, help="owner/name")
@click.option("--month", required=True, help="YYYY-MM")
@click.option(
    "--force", is_flag=True, help="Ask again for sections whose answers were refused, before their back-off ends."
)
@with_services(redis=False)
def narrate(services: Services, repo: str, month: str, force: bool) -> None:
    """Write the language-model narrator's prose of a month's report (its current cutoff) now: the sections
    whose content has none yet. A rate limit is waited out. Needs TRACKER_LLM_BASE_URL, TRACKER_LLM_MODEL
    and `narrator: llm`."""
    from tracker.core.report import DELIVERED, IN_PROGRESS
    from tracker.core.window import WindowError
    from tracker.narration.jobs import narrate_until, refinalize_if_late
    from tracker.reports.loading import UnknownRepository

    if services.config.narrator_model is None:
        raise click.ClickException("the narrator is not configured: set TRACKER_LLM_BASE_URL and TRACKER_LLM_MODEL")
    if services.config.narrator_for(repo) != "llm":
        raise click.ClickException(f"{repo} does not use the narrator: add `narrator: llm` to its TRACKER_CONFIG entry")
    try:
        outcome = narrate_until(services, repo, month, force=(DELIVERED, IN_PROGRESS) if force else (), say=click.echo)
        click.echo(outcome.said())
        if late := refinalize_if_late(services, repo, month, outcome):
            click.echo(late)
    except (UnknownRepository, WindowError) as exc:
        raise click.ClickException(str(exc)) from exc
    if outcome.error is not None:
        raise Failure("the narrator's endpoint failed (see above): the sections it did not write stay deterministic")


@main.command()
@with_services()
def schedule(services: Services) -> None:
    """Look for due work every TRACKER_SCHEDULE_EVERY seconds (RQ's cron scheduler): finalise every month
    that ended (plus TRACKER_FINALIZE_GRACE) without a record, and publish weekly partials where configured.
    Two schedulers are harmless: each month gets one record."""
    from rq.cron import CronScheduler

    from tracker.queue import RECORDS_QUEUE_NAME, wait_for_redis
    from workers.jobs import due_work

    if not wait_for_redis(services.require_redis(), stop_on_signals(), "schedule"):
        return
    scheduler = CronScheduler(connection=services.require_redis(), name=f"tracker-schedule-{os.getpid()}")
    scheduler.register(due_work, queue_name=RECORDS_QUEUE_NAME, interval=services.settings.schedule_every)
    scheduler.start()  # type: ignore[no-untyped-call]


@main.command()
@click.option(
    "--url",
    default=None,
    help="Post the deliveries, signed, to a running service's webhook (e.g. http://127.0.0.1:8000/webhook) "
    "instead of processing them in this process; the service must use this ledger (same TRACKER_DATA_DIR).",
)
@click.option("--wait", default=60.0, show_default=True, type=float, help="With --url: seconds to wait for processing.")
@with_services(redis=False)
def demo(services: Services, url: str | None, wait: float) -> None:
    """Load a bundled sample month through the webhook's path, with no network: real public
    NVIDIA/Megatron-LM pull requests of May 2026 with made-up lives. Running it again changes nothing."""
    from urllib.parse import urlsplit

    from tracker.demo import expected, read_bundle
    from tracker.demo.load import DemoRefused, load, post

    bundle = read_bundle()
    repo, month = bundle.repository, bundle.month
    click.echo(bundle.about)
    try:
        if url is None:
            loaded = load(services, bundle)
        else:
            loaded = post(services, bundle, url, services.settings.require_webhook_secret(), wait, click.echo)
    except DemoRefused as exc:
        raise click.ClickException(str(exc)) from exc
    if loaded.changed:
        click.echo(
            f"loaded {repo} {month}: {loaded.new_deliveries} of {loaded.deliveries} deliveries stored, "
            f"{loaded.processed_now} processed; {loaded.new_heads} of {loaded.heads} heads' files stored"
        )
    else:
        click.echo(
            f"nothing changed: the sample of {repo} {month} is loaded already "
            f"({loaded.deliveries} deliveries, {loaded.heads} heads' files)"
        )
    if loaded.pending:
        click.echo(f"{loaded.pending} deliveries are not processed yet (the service's workers are on it)", err=True)
    timezone = services.config.timezone_for(repo)
    wanted = expected(bundle, timezone, services.config.rules_for(repo))
    stats = wanted.stats
    click.echo(
        f"expected for {repo}, {month} through {wanted.window.cutoff.isoformat()} ({timezone}), substantive PRs: "
        f"{stats['opened']} opened, {stats['merged']} merged, {stats['closed_unmerged']} closed without merge, "
        f"{stats['active_at_cutoff']} active at cutoff"
    )
    if wanted.excluded:
        left_out = ", ".join(f"{count} {category.replace('_', '-')}" for category, count in wanted.excluded.items())
        click.echo(f"left out as not substantive: {left_out}")
    parts = urlsplit(url) if url else None
    base = f"{parts.scheme}://{parts.netloc}" if parts else "http://127.0.0.1:8000"
    click.echo("the report, while the service runs (`tracker run`):")
    for fmt, what in (("html", "HTML"), ("md", "Markdown"), ("json", "JSON")):
        click.echo(f"  {what:<8} {base}/reports/{repo}/{month}.{fmt}")
    click.echo("or without the web server:")
    click.echo(f"  tracker render --repo {repo} --month {month} --format html > report-{month}.html")


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--url", default="http://127.0.0.1:8000/webhook", show_default=True, help="The webhook URL.")
@click.option("--event", default=None, help="Event of plain JSON files (default: guessed from the body).")
@with_settings
def replay(settings: Settings, paths: tuple[Path, ...], url: str, event: str | None) -> None:
    """Post recorded deliveries, signed with TRACKER_WEBHOOK_SECRET.

    A `.jsonl` file holds one delivery a line: {"event", "delivery_id", "body"} (body as an object or
    a string). Any other file is one body; its delivery id is derived from its bytes, so posting the
    same file twice is a redelivery.
    """
    import httpx

    from tracker.web.signature import sign

    secret = settings.require_webhook_secret()
    answers: Counter[int] = Counter()
    with httpx.Client(timeout=30) as client:
        for delivery_event, delivery_id, body in _recorded(paths, event):
            response = client.post(
                url,
                content=body,
                headers={
                    "Content-Type": "application/json",
                    "User-Agent": "GitHub-Hookshot/tracker-replay",
                    "X-GitHub-Event": delivery_event,
                    "X-GitHub-Delivery": delivery_id,
                    "X-Hub-Signature-256": sign(secret, body),
                },
            )
            answers[response.status_code] += 1
            if response.status_code >= 400:
                click.echo(f"{delivery_id}: {response.status_code} {response.text.strip()}", err=True)
    click.echo(", ".join(f"{count} × {code}" for code, count in sorted(answers.items())))
    if any(code >= 400 for code in answers):
        sys.exit(1)


def _recorded(paths: tuple[Path, ...], event: str | None) -> Iterator[tuple[str, str, bytes]]:
    for path in paths:
        if path.suffix == ".jsonl":
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    record: dict[str, Any] = json.loads(line)
                    body = record["body"]
                    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                    yield record["event"], str(record["delivery_id"]), raw
                except (ValueError, KeyError, TypeError) as exc:
                    raise click.ClickException(
                        f"{path}:{number}: expected {{event, delivery_id, body}} ({exc})"
                    ) from exc
        else:
            raw = path.read_bytes()
            yield event or _guess_event(path, raw), _delivery_id_for(raw), raw


def _guess_event(path: Path, raw: bytes) -> str:
    try:
        keys = set(json.loads(raw))
    except (ValueError, TypeError) as exc:
        raise click.ClickException(f"{path} is not a JSON object; pass --event to send it anyway") from exc
    if "pull_request" in keys:
        return "pull_request"
    if "zen" in keys and "hook_id" in keys:
        return "ping"
    if "pusher" in keys or "commits" in keys:
        return "push"
    raise click.ClickException(f"cannot tell which event {path} is: pass --event")


def _delivery_id_for(raw: bytes) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "tracker-replay:" + hashlib.sha256(raw).hexdigest()))


@main.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON document itself.")
@with_services()
def status_command(services: Services, as_json: bool) -> None:
    """What GET /api/v1/status says, as tables: deliveries, hooks, queue, GitHub, history, publications.

    The document is built by the endpoint's own code, reading the ledger and Redis directly, so it
    answers while the web server is down; with TRACKER_ADMIN_TOKEN set it is the admin's view (private
    repositories, where the data is). A database or Redis that does not answer is one line (exit 1)."""
    from tracker.reports.render import json_bytes

    _require_redis(services, "start it (`tracker run` starts its own), or fix REDIS_URL")
    document = _status_document(services)
    if as_json:
        click.echo(json_bytes(document, indent=True, default=str).decode("utf-8"), nl=False)
        return
    from rich.console import Console

    console = Console()
    for key, value in document.items():
        heading = "GitHub" if key == "github" else key.replace("_", " ").capitalize()
        for shown in _status_renderables(heading, value):
            console.print(shown)


def _status_document(services: Services) -> dict[str, Any]:
    """The body GET /api/v1/status answers, made by its view in a request context of its own (no web
    server, no HTTP): one document, built in one place, for the API and the terminal."""
    from flask import Flask

    from tracker.web import api
    from tracker.web.context import install

    app = Flask("tracker.status")
    install(app.extensions, services)
    token = services.settings.admin_token
    headers = {"Authorization": f"Bearer {token.get_secret_value()}"} if token is not None else {}
    with app.test_request_context("/api/v1/status", headers=headers):
        body, _code, _headers = api.status()
    document: dict[str, Any] = body
    return document


def _status_renderables(title: str, value: Any) -> Iterator[Any]:
    """A section of the status document for the terminal: an object is its title over a table of its
    plain values (then a section of its own for each part that is an object or a list of objects), a
    list of objects a table with a column per key, anything else one line. Text from outside
    (repository names, GitHub's error messages) is shown as text, never read as rich's markup."""
    from rich.table import Table
    from rich.text import Text

    if _status_table(value) and isinstance(value, dict):
        plain = {key: item for key, item in value.items() if not _status_table(item)}
        if plain:
            table = Table(show_header=False)
            table.add_column(style="bold")
            table.add_column()
            for key, item in plain.items():
                table.add_row(Text(str(key)), Text(_status_cell(item)))
            yield Text(title, style="bold")
            yield table
        for key, item in value.items():
            if _status_table(item):
                yield from _status_renderables(f"{title}: {str(key).replace('_', ' ')}", item)
    elif _status_table(value):
        columns = list(dict.fromkeys(key for row in value for key in row))
        table = Table()
        for column in columns:
            table.add_column(Text(column.replace("_", " ")))
        for row in value:
            table.add_row(*(Text(_status_cell(row.get(column))) for column in columns))
        yield Text(title, style="bold")
        yield table
    else:
        line = Text(f"{title}: ", style="bold")
        line.append(_status_cell(value), style="default")
        yield line


def _status_table(value: Any) -> bool:
    """Whether a value of the document is shown as a table: a non-empty object or list of objects."""
    return bool(value) and (
        isinstance(value, dict) or (isinstance(value, list) and all(isinstance(item, dict) for item in value))
    )


def _status_cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | dict) and not value:
        return "none"
    if isinstance(value, list):
        return ", ".join(_status_cell(item) for item in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)
