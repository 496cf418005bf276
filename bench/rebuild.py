"""Rebuild benchmark: the real `tracker rebuild` over a large ledger.

--deliveries deliveries (~24 KB each, bench/_stories.py: PR lives over --months) are written straight
into tracker.schema.deliveries with batched executemany inserts (the rows Ledger.store writes, only
faster), then `tracker rebuild` runs as a subprocess with TRACKER_DATA_DIR (or TRACKER_DATABASE_URL)
set, timed from spawn to exit.

Baselines, same run, same ledger: reading every delivery body with one streamed SELECT (the least
any rebuild must do), and reading them through Ledger.iter_pull_request_deliveries (the rebuild's
own read path, without deriving or writing anything).

100,000 deliveries take about 2.5 GB in a temporary directory, deleted at the end.
Target (issue): 100,000 deliveries in under 2 minutes.

    .venv/bin/python bench/rebuild.py [--deliveries 100000]
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import time

from _heads import HeadsUnsupported, store_heads
from _stack import Stack, disk_usage, load_note, tracker_command
from _stories import REPO, ledger_row, plan_months, stories
from sqlalchemy import func, select

from tracker.config import load_config
from tracker.store.database import is_sqlite
from tracker.store.ledger import Ledger
from tracker.store.schema import deliveries, pr_facts, pr_versions

TARGET_SECONDS = 120.0
BYTES_PER_DELIVERY = 32 * 1024  # the body, its row and index entries, with room to spare


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deliveries", type=int, default=100_000)
    parser.add_argument("--prs", type=int, default=0, help="PRs (default: deliveries / 20)")
    parser.add_argument("--months", nargs="+", default=["2026-03", "2026-04", "2026-05", "2026-06"])
    parser.add_argument("--batch", type=int, default=1000, help="rows per insert transaction")
    parser.add_argument(
        "--no-heads", action="store_true", help="store no changed files for the PR heads (nothing to reclassify)"
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="give up on the rebuild after this long")
    parser.add_argument("--database-url", help="default: TRACKER_DATABASE_URL, else SQLite in a temp dir")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (the ledger: mind its size)")
    args = parser.parse_args()
    count = args.deliveries
    prs = args.prs or max(1, count // 20)

    with Stack(args.database_url, with_redis=False, keep=args.keep) as stack:
        free = shutil.disk_usage(stack.directory).free
        if not stack.external_database and free < count * BYTES_PER_DELIVERY * 1.2:
            raise SystemExit(
                f"{count:,} deliveries need about {count * BYTES_PER_DELIVERY / 2**30:.1f} GiB under "
                f"{stack.directory}, "
                f"and {free / 2**30:.1f} GiB are free: pass a smaller --deliveries"
            )
        engine = stack.engine
        started = time.monotonic()
        written = 0
        batch: list[dict[str, object]] = []
        insert = deliveries.insert()

        def flush(rows: list[dict[str, object]]) -> int:
            with engine.begin() as conn:
                conn.execute(insert, rows)
            return len(rows)

        seen_heads: set[tuple[int, str, str]] = set()
        for part in stories(plan_months(args.months, prs, count, seed=9), processes=2, chunk=25):
            batch += [ledger_row(item) for item in part]
            seen_heads.update((item.number, item.head_sha, item.title) for item in part)
            if len(batch) >= args.batch:
                written += flush(batch)
                batch = []
        if batch:
            written += flush(batch)
        if is_sqlite(engine):
            raw = engine.raw_connection()  # outside any transaction, or SQLite refuses to checkpoint
            try:
                raw.cursor().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            finally:
                raw.close()
        loaded = time.monotonic() - started
        started = time.monotonic()
        heads_note = "no head files"
        if not args.no_heads:
            try:
                stored_heads = store_heads(engine, load_config(stack.settings), REPO, sorted(seen_heads))
                heads_note = f"files of {stored_heads:,} heads stored in {time.monotonic() - started:.0f} s"
            except HeadsUnsupported as exc:
                heads_note = str(exc)
        size = disk_usage(stack.data_dir) if not stack.external_database else 0
        print(
            f"rebuild: {written:,} deliveries of {prs:,} PRs over {', '.join(args.months)} written in {loaded:.0f} s "
            f"({written / loaded:,.0f}/s); {heads_note}"
            + (f", ledger {size / 2**30:.2f} GiB" if size else "")
            + f"; {stack.database_url.split(':')[0]}; {load_note()}"
        )

        # Baseline 1: every body, one streamed SELECT.
        started = time.monotonic()
        total_bytes = 0
        with engine.connect().execution_options(read_only=True, stream_results=True, yield_per=1000) as conn:
            for (body,) in conn.execute(select(deliveries.c.body)):
                total_bytes += len(body)
        read_all = time.monotonic() - started

        # Baseline 2: the rebuild's own read path, nothing derived or written.
        started = time.monotonic()
        read_through = sum(len(batch) for batch in Ledger(engine).iter_pull_request_deliveries())
        read_path = time.monotonic() - started

        # The real thing.
        log = stack.directory / "rebuild.log"
        started = time.monotonic()
        child = stack.spawn([*tracker_command(), "rebuild"], log=log)
        try:
            code = child.wait(args.timeout)
        except Exception:  # noqa: BLE001  (TimeoutExpired)
            stack.stop(child)
            raise SystemExit(f"`tracker rebuild` did not finish within {args.timeout:.0f} s") from None
        seconds = time.monotonic() - started
        output = log.read_text(errors="replace")
        found = re.search(r"rebuilt from (\d+) deliveries; (\d+) failed(?:; (\d+) heads reclassified)?", output)
        if code != 0 or not found:
            print(output[-3000:])
            raise SystemExit(f"`tracker rebuild` exited with {code}")
        processed, failed = int(found.group(1)), int(found.group(2))
        reclassified = f", {found.group(3)} heads reclassified" if found.group(3) else ""
        with engine.connect() as conn:
            facts = conn.execute(select(func.count()).select_from(pr_facts)).scalar_one()
            versions = conn.execute(select(func.count()).select_from(pr_versions)).scalar_one()
            pending = conn.execute(
                select(func.count()).select_from(deliveries).where(deliveries.c.status != "processed")
            ).scalar_one()

        print(
            f"baseline  read every body (one streamed SELECT)        {read_all:7.1f} s  "
            f"{count / read_all:9,.0f} deliveries/s"
            f"   1.00 × baseline  ({total_bytes / 2**30:.2f} GiB)"
        )
        print(
            f"baseline  Ledger.iter_pull_request_deliveries (read)   {read_path:7.1f} s  "
            f"{read_through / read_path:9,.0f} "
            f"deliveries/s  {read_path / read_all:5.2f} × baseline"
        )
        scaled = seconds * 100_000 / count
        print(
            f"rebuild   `tracker rebuild` (subprocess, spawn to exit) {seconds:7.1f} s  {processed / seconds:9,.0f} "
            f"deliveries/s  {seconds / read_all:5.2f} × baseline  ({processed:,} processed, {failed} failed, "
            f"{pending} not processed after; {facts:,} pr_facts + {versions:,} pr_versions{reclassified})  "
            f"target < {TARGET_SECONDS:g} s for 100,000"
            + (f" (≈ {scaled:.0f} s scaled linearly)" if count != 100_000 else "")
            + f": {'PASS' if scaled < TARGET_SECONDS else 'FAIL'}"
        )
        ok = processed == count and failed == 0 and pending == 0
        print(f"rebuild: done; {load_note()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
