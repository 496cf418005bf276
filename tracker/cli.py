"""The `tracker` command."""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from rq import Queue

from tracker.settings import Settings, SettingsError, load_settings

log = logging.getLogger("tracker")


def _queue(settings: Settings) -> Queue:
    """The delivery queue on the configured (or running embedded) Redis."""
    from tracker.embedded_redis import redis_url
    from tracker.queue import connect_redis, delivery_queue

    try:
        return delivery_queue(connect_redis(redis_url(settings)))
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from exc


def _settings() -> Settings:
    try:
        return load_settings()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from exc


@click.group()
@click.option("-v", "--verbose", is_flag=True, help="Log debug messages.")
def main(verbose: bool) -> None:
    """Monthly activity tracker for GitHub repositories."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--workers", default=2, show_default=True, type=int, help="RQ worker processes.")
@click.option("--web-processes", default=2, show_default=True, type=int, help="gunicorn worker processes.")
@click.option("--sweep-every", default=60.0, show_default=True, type=float, help="Seconds between sweeps.")
def run(host: str, port: int, workers: int, web_processes: int, sweep_every: float) -> None:
    """Start web, workers, sweep (and the embedded Redis when REDIS_URL is unset)."""
    from tracker.supervisor import run as supervise

    try:
        sys.exit(supervise(_settings(), host, port, workers, web_processes, sweep_every))
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from exc


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--processes", default=2, show_default=True, type=int, help="gunicorn worker processes.")
def web(host: str, port: int, processes: int) -> None:
    """Serve the webhook and the API with gunicorn."""
    from tracker.app import create_app
    from tracker.server import WebServer

    settings = _settings()
    try:
        create_app(settings)  # fail here, with a clear message, rather than in every gunicorn worker
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from exc
    WebServer(settings, host, port, processes).run()


@main.command()
@click.option("--burst", is_flag=True, help="Stop when the queue is empty.")
def worker(burst: bool) -> None:
    """Process deliveries from the queue (RQ)."""
    from rq import SimpleWorker

    from tracker.queue import github_queue
    from workers import runtime
    from workers.sweep import sweep

    settings = _settings()
    queue = _queue(settings)
    connection = queue.connection
    rt = runtime.Runtime.from_settings(settings, redis=connection)
    runtime.install(rt)
    sweep(rt.ledger, queue, grace_seconds=0)
    # SimpleWorker runs jobs in this process: jobs are short and idempotent, and forking a work horse
    # per job costs about 14 ms of CPU against 3 ms (MEASURED.md). Deliveries come first; GitHub
    # fetches wait behind them.
    SimpleWorker([queue, github_queue(connection)], connection=connection).work(burst=burst, with_scheduler=True)


@main.command("sweep")
@click.option("--every", default=0.0, type=float, help="Repeat every N seconds (0: once).")
@click.option("--grace", default=60.0, show_default=True, type=float, help="Skip deliveries younger than this.")
def sweep_command(every: float, grace: float) -> None:
    """Re-enqueue accepted deliveries that were never processed."""
    import signal

    from workers.runtime import Runtime
    from workers.sweep import sweep, sweep_forever

    settings = _settings()
    queue = _queue(settings)
    ledger = Runtime.from_settings(settings).ledger
    if every <= 0:
        click.echo(f"re-enqueued {sweep(ledger, queue, grace)} deliveries")
        return
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    sweep_forever(ledger, queue, every, stop, grace)


@main.command()
def redis() -> None:
    """Run the embedded Redis server in the foreground (for `tracker web` and `tracker worker`)."""
    import signal

    from tracker.embedded_redis import EmbeddedRedis

    settings = _settings()
    server = EmbeddedRedis(settings.data_dir)
    if server.is_running():
        raise click.ClickException(f"an embedded Redis already answers on {server.socket}")
    server.start()
    click.echo(f"embedded Redis on {server.url}; export REDIS_URL={server.url} or leave it unset")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        stop.wait()
    finally:
        server.stop()


@main.command()
def rebuild() -> None:
    """Drop every derived table and re-derive it from the raw ledger (stop the workers first)."""
    from tracker.rebuild import rebuild as run_rebuild
    from workers.runtime import Runtime

    rt = Runtime.from_settings(_settings())
    counts = rt.ledger.counts()
    with click.progressbar(length=counts.received, label="rebuilding", file=sys.stderr) as bar:
        processed, failed, heads = run_rebuild(rt.ledger, rt.state, rt.config, progress=bar.update)
    click.echo(f"rebuilt from {processed} deliveries; {failed} failed; {heads} heads reclassified")


@main.command("retry-failed")
def retry_failed() -> None:
    """Put every failed delivery back on the queue."""
    from tracker.queue import enqueue_deliveries
    from workers.runtime import Runtime

    settings = _settings()
    queue = _queue(settings)
    ledger = Runtime.from_settings(settings).ledger
    ids = ledger.reset_failed()
    enqueue_deliveries(queue, ids)
    click.echo(f"re-enqueued {len(ids)} failed deliveries")


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


def _print_report(repo: str, month: str, cutoff: str | None, lang: str, fmt: str) -> None:
    from tracker.months import UnknownRepository, resolve
    from tracker.render import UnknownLanguage, language
    from tracker.reports import rendered
    from tracker.window import WindowError
    from workers.runtime import Runtime

    rt = Runtime.from_settings(_settings())
    try:
        wanted = resolve(rt.state, rt.config, repo, month, cutoff)
        text = rendered(rt.state, rt.config, wanted, fmt, language(lang))
    except (UnknownRepository, WindowError, UnknownLanguage) as exc:
        raise click.ClickException(str(exc)) from exc
    sys.stdout.buffer.write(text.encode("utf-8"))


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--url", required=True, help="The webhook URL, e.g. http://127.0.0.1:8000/webhook")
@click.option("--event", default=None, help="Event of plain JSON files (default: guessed from the body).")
def replay(paths: tuple[Path, ...], url: str, event: str | None) -> None:
    """Post recorded deliveries, signed with TRACKER_WEBHOOK_SECRET.

    A `.jsonl` file holds one delivery a line: {"event", "delivery_id", "body"} (body as an object or
    a string). Any other file is one body; its delivery id is derived from its bytes, so posting the
    same file twice is a redelivery.
    """
    import httpx

    from tracker.signature import sign

    try:
        secret = _settings().require_webhook_secret()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from exc
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
