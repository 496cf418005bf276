"""Theme grouping of the monthly report on real Megatron-LM months (issue 12).

Every figure comes from the real pipeline: `build_snapshot` then `build_report(snapshot, paths, taxonomy)`
over the real merged PRs of the shared test data (data/megatron/, README there). Each PR gets one attribute version
(its title, base branch = its branch, no labels or body), the verdict of `classify_head` with the
published rules over its changed files, an opening an hour before its merge and the merge at its
committer date; its changed files are its paths. A PR merged after a cutoff is left out of that
cutoff's snapshot. The taxonomy is the one of examples/megatron-lm.yaml.

1. August 2026 (the development set, cutoff 2026-08-22): adjusted Rand index of the Delivered themes
   against the published report's, over the published Delivered PRs the report narrates as Delivered,
   with and without the taxonomy, against grouping the same PRs by their most common three-level
   directory of non-test files (the data README gives it 0.43). Targets: >= 0.6 and >= 0.5.
2. August and the months 2026-03 to 2026-06 (cutoff: the last day), with and without the taxonomy, per
   section: changes, themes, theme sizes, largest theme share (target <= 30 % unless one area
   dominates), share in "other" (target <= 10 %), and the lines of the Markdown (issue 32: highlight
   lines and folded ones; en words once the citation links are removed: median <= 25, none over 40; no
   line joining more than three changes; in Chinese, CJK characters the majority of the words outside
   quoted titles and citations).
   Which data tuned what: the grouping's parameters were tuned on August's published grouping (the
   only one there is); the naming vocabulary and the noise rules (reverts, upkeep) were written reading
   the titles of all five months. The months kept aside by the project (July 2026 among them) are not
   here: figures of these five months are development figures, not a test of generalisation.
3. Churn between weekly cutoffs: over the PRs narrated Delivered at both cutoffs, the share of PR
   pairs whose "same theme" status changed (1 - Rand index) and the ARI between the two groupings.
4. Time (median of --runs, first run apart: theme choices are memoised per taxonomy; the cyclic garbage
   collector paused, as the service does while it builds a report) of
   build_report and of render(md, en) for the largest month and for a synthetic 1,400-PR month
   (every PR of the data, repeated where short, renumbered, merges spread over May 2026), against
   json.dumps(report_document(report)) of the same report in the same run; and the 1,400-PR month's
   build_report once the month changed (groupings forgotten, each change's features remembered, as in
   a web process at the next poll) against the same from nothing.

Run: .venv/bin/python bench/themes.py [--data DIR] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import yaml
from sklearn.metrics import adjusted_rand_score, rand_score

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _stack import _machine_cpu, _own_cpu, interference_note, load_note  # noqa: E402

from bench.fixtures.paths import MEGATRON  # noqa: E402
from tracker.config import TrackerConfig  # noqa: E402
from tracker.core import clusters  # noqa: E402
from tracker.core.attributes import AttributeVersion  # noqa: E402
from tracker.core.classify import ChangedFile, HeadVerdict, Rules, classify_head  # noqa: E402
from tracker.core.report import Report, build_report  # noqa: E402
from tracker.core.snapshot import MonthSnapshot, build_snapshot  # noqa: E402
from tracker.core.taxonomy import ThemeConfig  # noqa: E402
from tracker.core.themes import is_auxiliary  # noqa: E402
from tracker.core.timeline import Fact, FactKind  # noqa: E402
from tracker.core.window import Month, month_window  # noqa: E402
from tracker.reports.collector import collector_paused  # noqa: E402
from tracker.reports.render import render, report_document  # noqa: E402

REPO = "NVIDIA/Megatron-LM"
TZ = "Asia/Shanghai"
AUGUST, HELD_OUT = "merged-prs-2026-08-01-to-22.jsonl", "merged-prs-2026-03-to-06.jsonl"
PUBLISHED = "published-themes-2026-08-23.json"
DELIVERED = "delivered"
SYNTHETIC = 1400
HEADINGS = {
    "Delivered": "delivered",
    "In Progress": "in_progress",
    "已交付成果": "delivered",
    "进行中的方向": "in_progress",
}
CITATION = re.compile(r"\[[^\]]*#\d+\]\([^)]*\)")
EMPTY_PARENTHESES = re.compile(r"[(（][\s,、]*[)）]")
CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uf900-\ufaff\uff00-\uffef]")
_verdicts: dict[int, HeadVerdict] = {}

PR = dict[str, Any]


def merged_at(pr: PR) -> int:
    return int(datetime.fromisoformat(pr["committer_date"]).timestamp())


def snapshot_of(prs: Sequence[PR], month: str, cutoff: date) -> tuple[MonthSnapshot, dict[int, list[str]]]:
    window = month_window(Month.parse(month), cutoff, TZ)
    versions, verdicts, timelines, paths = {}, {}, {}, {}
    for pr in prs:
        number, merged = pr["pr_number"], merged_at(pr)
        if merged >= window.end:
            continue
        sha = f"{number:040x}"
        files = [f["path"] for f in pr["files"]]
        versions[number] = AttributeVersion(
            merged - 3600, f"d{number}", pr["title"], "", pr["branch"], f"b{number}", sha, (), False, "x"
        )
        if number not in _verdicts:
            _verdicts[number] = classify_head(sha, [ChangedFile(p) for p in files], Rules())
        verdicts[(number, sha)] = _verdicts[number]
        timelines[number] = (Fact(FactKind.OPENED, merged - 3600), Fact(FactKind.MERGED, merged))
        paths[number] = files
    return build_snapshot(REPO, window, timelines, versions, verdicts), paths


def delivered_themes(report: Report) -> dict[int, str]:
    return {n: place["theme"] for n, place in report.placement().items() if place["section"] == DELIVERED}


def directory_baseline(paths: Sequence[str]) -> str:
    code = [p for p in paths if not is_auxiliary(p)] or list(paths)
    return Counter("/".join(p.split("/")[:-1][:3]) for p in code).most_common(1)[0][0]


def bullets(markdown: str) -> dict[str, list[str]]:
    """The bullets under a `### ` theme of each narrated section, citation links removed."""
    found: dict[str, list[str]] = defaultdict(list)
    section, in_theme = None, False
    for line in markdown.splitlines():
        if line.startswith("## "):
            section, in_theme = HEADINGS.get(line[3:].strip()), False
        elif line.startswith("### "):
            in_theme = section is not None
        elif in_theme and section and re.match(r"\s*- ", line):
            text = EMPTY_PARENTHESES.sub("", CITATION.sub("", line))
            found[section].append(re.sub(r"^\s*- ", "", text).strip())
    return found


def zh_words(text: str) -> float:
    return len(CJK.findall(text)) / 2 + len(CJK.sub(" ", text).split())


# A quotation in Chinese text: a PR's title or description sentence, kept in English.
QUOTED = re.compile(r"“[^”]*”")


def cjk_share(markdown: str, section: str) -> float:
    """Of the words of a Chinese section outside quoted titles and citations, the share that are CJK
    characters (each a word; a Latin word is a run of letters or digits)."""
    text = section_text(markdown, section)
    text = QUOTED.sub(" ", CITATION.sub(" ", text))
    latin = len(re.findall(r"[A-Za-z0-9]+", CJK.sub(" ", text)))
    cjk = len(CJK.findall(text))
    return cjk / max(1, cjk + latin)


def section_text(markdown: str, section: str) -> str:
    """The lines of one narrated section (its themes, lines and folds)."""
    lines, inside = [], False
    for line in markdown.splitlines():
        if line.startswith("## "):
            inside = HEADINGS.get(line[3:].strip()) == section
        elif inside:
            lines.append(line)
    return "\n".join(lines)


def section_lines(label: str, report: Report) -> list[str]:
    en, zh = bullets(render(report, "md", "en")), bullets(render(report, "md", "zh-CN"))
    chinese = render(report, "md", "zh-CN")
    lines = []
    for section in report.sections:
        sizes = sorted((len(theme.changes) for theme in section.themes), reverse=True)
        total = sum(sizes)
        if not total:
            continue
        other = sum(len(theme.changes) for theme in section.themes if theme.id == "other")
        words = [len(b.split()) for b in en[section.id]] or [0]
        zh_est = [zh_words(b) for b in zh[section.id]] or [0.0]
        joined = max((len(h.shown) for theme in section.themes for h in theme.highlights), default=0)
        lines.append(
            f"{label} {section.id}: {total} changes in {len(sizes)} themes, sizes {' '.join(map(str, sizes))}; "
            f"largest theme {100 * sizes[0] / total:.1f} % (target <= 30 %); "
            f"in 'other' {100 * other / total:.1f} % (target <= 10 %)"
        )
        lines.append(
            f"{label} {section.id} lines: {len(words)} (highlight lines and folded ones); en median "
            f"{statistics.median(words):.0f} words (target <= 25), longest {max(words)} (target <= 40), "
            f"{sum(w > 40 for w in words)} over 40; most changes one line joins {joined} (target <= 3); "
            f"zh-CN longest ~{max(zh_est):.0f} words (2 CJK characters a word); CJK share of the Chinese words "
            f"outside titles and citations {100 * cjk_share(chinese, section.id):.0f} % (target > 50 %)"
        )
    return lines


def median_first(times: Sequence[float]) -> str:
    return f"{statistics.median(times):.1f} ms (first {times[0]:.1f})"


def timing_line(label: str, snapshot: MonthSnapshot, paths: dict[int, list[str]], taxonomy: Any, runs: int) -> str:
    builds, renders, dumps = [], [], []
    for _ in range(runs):
        with collector_paused():  # as the service builds a report (tracker.reports.cache, .warm)
            started = time.perf_counter()
            report = build_report(snapshot, paths, taxonomy)
            built = time.perf_counter()
            render(report, "md", "en")
            rendered = time.perf_counter()
            json.dumps(report_document(report))
        builds.append((built - started) * 1000)
        renders.append((rendered - built) * 1000)
        dumps.append((time.perf_counter() - rendered) * 1000)
    build, rendering, baseline = (statistics.median(t) for t in (builds, renders, dumps))
    return (
        f"time {label}: build_report {median_first(builds)}, render md en {median_first(renders)}; "
        f"baseline json.dumps(report_document) {baseline:.1f} ms; build {build / baseline:.2f} x, "
        f"render {rendering / baseline:.2f} x, build + render {(build + rendering) / baseline:.2f} x baseline"
    )


def regroup_line(label: str, snapshot: MonthSnapshot, paths: dict[int, list[str]], taxonomy: Any, runs: int) -> str:
    """build_report once the month has changed, as a web process does it: its sections grouped again (the
    groupings forgotten) with what else it remembers of the changes kept (each one's features, its title's
    terms), against the same from nothing (`clusters.forget`)."""
    again: list[float] = []
    cold: list[float] = []
    for _ in range(runs):
        for times, forget in ((again, clusters._group.cache_clear), (cold, clusters.forget)):
            forget()
            with collector_paused():
                started = time.perf_counter()
                build_report(snapshot, paths, taxonomy)
                times.append((time.perf_counter() - started) * 1000)
    return (
        f"time {label}, grouped again (the month changed): build_report {statistics.median(again):.1f} ms; "
        f"from nothing (clusters.forget) {statistics.median(cold):.1f} ms"
    )


def synthetic_month(prs: Sequence[PR]) -> list[PR]:
    start = datetime(2026, 5, 1, tzinfo=ZoneInfo(TZ))
    span = int(timedelta(days=31).total_seconds())
    out = []
    for i in range(SYNTHETIC):
        moment = start + timedelta(seconds=(2 * i + 1) * span // (2 * SYNTHETIC))
        out.append({**prs[i % len(prs)], "pr_number": 100_000 + i, "committer_date": moment.isoformat()})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--data", type=Path, default=MEGATRON.parent, help="the Megatron-LM data directory (default: %(default)s)"
    )
    parser.add_argument("--runs", type=int, default=5, help="timed runs per figure (median)")
    args = parser.parse_args()
    missing = [name for name in (AUGUST, HELD_OUT, PUBLISHED) if not (args.data / name).is_file()]
    if missing:
        sys.exit(f"bench/themes.py: {', '.join(missing)} not found in {args.data} (give --data DIR)")
    machine, own = _machine_cpu(), _own_cpu()
    print(f"themes: data {args.data}; {load_note()}")
    raw = yaml.safe_load((ROOT / "examples" / "megatron-lm.yaml").read_text())
    taxonomy: tuple[ThemeConfig, ...] = TrackerConfig.model_validate(raw).themes_for(REPO)
    modes: list[tuple[str, Sequence[ThemeConfig]]] = [("taxonomy", taxonomy), ("no taxonomy", ())]

    def read(name: str) -> list[PR]:
        return [json.loads(line) for line in (args.data / name).read_text().splitlines() if line.strip()]

    months: dict[str, list[PR]] = defaultdict(list)
    for pr in read(HELD_OUT):
        months[pr["month_shanghai"]].append(pr)
    august = read(AUGUST)
    last = {month: Month.parse(month).last_day for month in months}

    # 4 first (printed last), while no theme choice is memoised yet: the first synthetic build is cold.
    everything = [*august, *(pr for m in sorted(months) for pr in months[m])]
    largest = max(months, key=lambda m: len(months[m]))
    synthetic = snapshot_of(synthetic_month(everything), "2026-05", date(2026, 5, 31))
    timing = [
        timing_line(
            f"synthetic 2026-05 ({SYNTHETIC} PRs: the {len(everything)} real ones, then repeats), taxonomy",
            *synthetic,
            taxonomy,
            args.runs,
        ),
        regroup_line(f"synthetic 2026-05 ({SYNTHETIC} PRs), taxonomy", *synthetic, taxonomy, args.runs),
        timing_line(
            f"{largest} (largest month, {len(months[largest])} PRs), taxonomy",
            *snapshot_of(months[largest], largest, last[largest]),
            taxonomy,
            args.runs,
        ),
    ]

    # 1. The development set against the published grouping.
    published = {
        p["pr"]: p["theme"] for p in json.loads((args.data / PUBLISHED).read_text()) if p["section"] == "Delivered"
    }
    snapshot, paths = snapshot_of(august, "2026-08", date(2026, 8, 22))
    reports = {name: build_report(snapshot, paths, tax) for name, tax in modes}
    common = sorted(set(published) & set(delivered_themes(reports["taxonomy"])))
    truth = [published[n] for n in common]
    baseline = adjusted_rand_score(truth, [directory_baseline(paths[n]) for n in common])
    print(f"2026-08 cutoff 2026-08-22: {len(common)} of {len(published)} published Delivered PRs narrated as Delivered")
    print(f"baseline (most common 3-level directory of non-test files): ARI {baseline:.3f} (data README: 0.43)")
    for name, target in (("taxonomy", 0.6), ("no taxonomy", 0.5)):
        ours = delivered_themes(reports[name])
        ari = adjusted_rand_score(truth, [ours[n] for n in common])
        print(f"ARI {name}: {ari:.3f} ({ari / baseline:.2f} x baseline; target >= {target})")

    # 2. Shapes of the sections and bullets, every month.
    cases = [("2026-08", august, date(2026, 8, 22))] + [(m, months[m], last[m]) for m in sorted(months)]
    for month, prs, cutoff in cases:
        snapshot, paths = snapshot_of(prs, month, cutoff)
        for name, tax in modes:
            for line in section_lines(f"{month} {name}", build_report(snapshot, paths, tax)):
                print(line)

    # 3. Churn between weekly cutoffs.
    for month, prs, cutoff in cases:
        days = [8, 15, 22] if month == "2026-08" else [7, 14, 21, cutoff.day]
        cutoffs = [cutoff.replace(day=d) for d in days]
        snapshots = [snapshot_of(prs, month, c) for c in cutoffs]
        for name, tax in modes:
            themes = [delivered_themes(build_report(s, p, tax)) for s, p in snapshots]
            for i in range(1, len(cutoffs)):
                both = sorted(set(themes[i - 1]) & set(themes[i]))
                before, after = [themes[i - 1][n] for n in both], [themes[i][n] for n in both]
                churn = 1 - rand_score(before, after) if len(both) > 1 else 0.0
                ari = adjusted_rand_score(before, after) if len(both) > 1 else 1.0
                print(
                    f"churn {month} {name} {cutoffs[i - 1].isoformat()} -> {cutoffs[i].isoformat()}: "
                    f"{len(both)} PRs in both; {100 * churn:.1f} % of pairs changed (1 - Rand index); ARI {ari:.3f}"
                )

    # 4. Time.
    for line in timing:
        print(line)
    print(f"themes: done; {load_note()}")
    print(interference_note(machine, own))


if __name__ == "__main__":
    main()
