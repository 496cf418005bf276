"""`tracker demo` as a newcomer runs it: the bundled sample month on a fresh data directory, with
GitHub's API pointed at a closed loopback port so that any request to it would fail."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import signal
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, select

from bench.fixtures.paths import EXAMPLES, MEGATRON, WEBHOOKS, needs_shared
from tests.support.processes import TRACKER, clean_env, free_port, wait_healthy
from tracker.core.payloads import parse_pull_request_event
from tracker.demo import BUNDLE, read_bundle
from tracker.settings import load_settings
from tracker.store.database import connect
from tracker.store.heads import HeadStore
from tracker.store.ledger import Delivery, Ledger
from tracker.store.schema import deliveries, head_files, heads, pr_facts, pr_versions

REPO = "NVIDIA/Megatron-LM"
MONTH = "2026-05"
NOWHERE = "http://127.0.0.1:9"  # the discard port: nothing listens, so a GitHub request would fail
STATS = re.compile(r"substantive PRs: (\d+) opened, (\d+) merged, (\d+) closed without merge, (\d+) active at cutoff")
DEMO_DIR = Path(__file__).resolve().parents[1] / "tracker" / "demo"


def demo_env(directory: Path, **values: str) -> dict[str, str]:
    env = clean_env(TRACKER_DATA_DIR=str(directory), GITHUB_API_URL=NOWHERE, **values)
    env.pop("GITHUB_TOKEN", None)
    return env


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*TRACKER, *args], env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return done


def printed_stats(output: str) -> dict[str, int]:
    found = STATS.search(output)
    assert found, output
    keys = ("opened", "merged", "closed_unmerged", "active_at_cutoff")
    return dict(zip(keys, (int(n) for n in found.groups()), strict=True))


def stored(directory: Path) -> dict[str, Any]:
    """What the ledger holds: row counts, the sample's delivery statuses, heads still wanted."""
    engine = connect(load_settings(data_dir=directory, database_url=None).resolved_database_url)
    try:
        with engine.connect() as conn:
            counts = {
                table.name: conn.execute(select(func.count()).select_from(table)).scalar_one()
                for table in (deliveries, heads, head_files, pr_facts, pr_versions)
            }
            statuses = dict(conn.execute(select(deliveries.c.id, deliveries.c.status)).all())
        missing = HeadStore(engine).missing()
    finally:
        engine.dispose()
    return {"counts": counts, "statuses": statuses, "missing": missing}


def test_demo_loads_the_sample_month_and_prints_what_the_report_says(data_dir: Path) -> None:  # noqa: F811
    env = demo_env(data_dir)
    first = run(env, "demo").stdout
    assert "Sample data" in first and "made-up lives" in first
    assert f"loaded {REPO} {MONTH}" in first
    for fmt in ("html", "md", "json"):
        assert f"http://127.0.0.1:8000/reports/{REPO}/{MONTH}.{fmt}" in first
    assert f"tracker render --repo {REPO} --month {MONTH}" in first
    expected = printed_stats(first)
    assert all(count > 0 for count in expected.values()), expected  # the sample shows every statistic

    snapshot_text = run(env, "snapshot", "--repo", REPO, "--month", MONTH).stdout
    snapshot = json.loads(snapshot_text)
    assert snapshot["stats"] == expected
    assert (snapshot["cutoff"], snapshot["final"]) == (f"{MONTH}-31", True)
    assert snapshot["pending_classification"] == 0
    assert snapshot["coverage"]["complete"] is True
    left_out = re.search(r"left out as not substantive: (.*)", first)
    assert left_out, first
    excluded = {k: v for k, v in snapshot["excluded"].items() if v}
    assert left_out.group(1) == ", ".join(f"{n} {k.replace('_', '-')}" for k, n in sorted(excluded.items()))

    # Every delivery went in under its original id and was processed; every head's files are stored,
    # so nothing is left for a worker to ask GitHub.
    after_first = stored(data_dir)
    bundle = read_bundle()
    assert after_first["statuses"] == {d.delivery_id: "processed" for d in bundle.deliveries}
    assert after_first["missing"] == []
    assert after_first["counts"]["heads"] == sum(len(story.heads) for story in bundle.stories)

    # Twice is once: nothing changes, and the command says so.
    second = run(env, "demo").stdout
    assert "nothing changed" in second
    assert printed_stats(second) == expected
    assert stored(data_dir) == after_first
    assert run(env, "snapshot", "--repo", REPO, "--month", MONTH).stdout == snapshot_text


def test_demo_posts_to_a_running_service_that_asks_github_nothing(data_dir: Path) -> None:  # noqa: F811
    port = free_port()
    env = demo_env(data_dir, TRACKER_WEBHOOK_SECRET="demo-secret")
    service = subprocess.Popen([*TRACKER, "run", "--port", str(port), "--workers", "1"], env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base)
        output = run(env, "demo", "--url", f"{base}/webhook", "--wait", "60").stdout
        count = len(read_bundle().deliveries)
        assert f"{count} × 202" in output
        for fmt in ("html", "md", "json"):
            assert f"{base}/reports/{REPO}/{MONTH}.{fmt}" in output
        snapshot = httpx.get(f"{base}/reports/{REPO}/{MONTH}.json", timeout=30).json()
        assert snapshot["stats"] == printed_stats(output)
        assert snapshot["pending_classification"] == 0  # the service's workers never asked GitHub
        html = httpx.get(f"{base}/reports/{REPO}/{MONTH}.html", timeout=30)
        assert html.status_code == 200 and "Megatron-LM" in html.text

        again = run(env, "demo", "--url", f"{base}/webhook").stdout
        assert f"{count} × 200" in again and "nothing changed" in again
    finally:
        service.send_signal(signal.SIGTERM)
        assert service.wait(30) == 0


def test_demo_refuses_a_ledger_that_tracks_the_repository_for_real(data_dir: Path) -> None:  # noqa: F811
    sample = read_bundle().deliveries[0]
    engine = connect(load_settings(data_dir=data_dir, database_url=None).resolved_database_url)
    try:
        real = Delivery("a-real-delivery", "pull_request", "opened", REPO, "1", "application/json", {}, sample.body, 0)
        assert Ledger(engine).store(real)
    finally:
        engine.dispose()
    done = subprocess.run([*TRACKER, "demo"], env=demo_env(data_dir), capture_output=True, text=True, timeout=180)
    assert done.returncode == 1
    assert f"already holds a delivery of {REPO} that is not the sample's" in done.stderr
    assert stored(data_dir)["counts"]["deliveries"] == 1  # nothing was added


def test_the_bundle_is_small_self_contained_and_in_githubs_shape() -> None:
    size = (DEMO_DIR / BUNDLE).stat().st_size
    assert size < 300_000, size
    bundle = read_bundle()
    assert (bundle.repository, bundle.month) == (REPO, MONTH)
    assert 60 <= len(bundle.stories) <= 120
    assert len({d.delivery_id for d in bundle.deliveries}) == len(bundle.deliveries)
    stories = {story.number: story for story in bundle.stories}
    for delivery in bundle.deliveries:
        assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", delivery.delivery_id)
        body = json.loads(delivery.body)
        assert "installation" not in body  # a plain webhook's delivery: no GitHub App installation
        event = parse_pull_request_event(delivery.body)
        assert event.repository.full_name == REPO
        story = stories[event.pull_request.number]
        assert event.pull_request.title == story.title and event.pull_request.base.ref == story.base
        assert event.pull_request.head.sha in story.heads  # each head's files travel with the sample
    twins = [story for story in bundle.stories if story.base == "dev"]
    assert twins, "the sample has dev PRs (dev/main twins)"


@needs_shared
def test_the_sample_prs_are_real_megatron_prs() -> None:
    real = {row["pr_number"]: row for row in map(json.loads, filter(str.strip, MEGATRON.read_text().splitlines()))}
    bundle = read_bundle()
    for story in bundle.stories:
        row = real[story.number]
        assert (story.title, story.base) == (row["title"], row["branch"]), story.number
        paths = [f["path"] for f in row["files"]]
        listings = list(story.heads.values())
        assert [item["filename"] for item in listings[-1]] == paths, story.number
        for listing in listings:
            assert [item["filename"] for item in listing] == paths[: len(listing)], story.number
        merged = [step.at for step in story.life if step.action == "merged"]
        if merged:  # merged at the real merge instant
            assert merged == [int(datetime.fromisoformat(row["committer_date"]).timestamp())], story.number
        assert row["month_shanghai"] in (MONTH, "2026-06")


def test_example_deliveries_are_githubs_bytes() -> None:
    folder = EXAMPLES / "deliveries"
    readme = (folder / "README.md").read_text()
    files = sorted(folder.glob("*.json"))
    assert [f.name for f in files] == [
        f"pull_request.{action}.json" for action in ("closed", "labeled", "opened", "reopened", "synchronize")
    ]
    for path in files:
        assert hashlib.sha256(path.read_bytes()).hexdigest() in readme, path.name
        if WEBHOOKS.is_dir():
            assert path.read_bytes() == (WEBHOOKS / path.name).read_bytes(), path.name


def test_replay_posts_to_the_local_service_by_default() -> None:
    help_text = run(clean_env(), "replay", "--help").stdout
    assert "http://127.0.0.1:8000/webhook" in help_text


def test_the_bundle_opens_as_plain_gzip_json() -> None:
    data = json.loads(gzip.decompress((DEMO_DIR / BUNDLE).read_bytes()))
    assert data["format"] == 1 and "tools/make_demo.py" in data["about"]
