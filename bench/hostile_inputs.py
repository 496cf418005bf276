"""How long the pure core takes on hostile text: the figures the tests of issue 8 no longer assert.

tests/core/test_groups.py, test_titles.py and test_untrusted_text.py feed these inputs and only ask
that each call returns (tests/support/watchdog.py); the times are here. Each figure is the fastest of
--runs calls, in milliseconds, with the core's caches (`lru_cache`s of tracker.core.groups and
tracker.core.titles) cleared before each call:

1. `change_groups` + `display_title` on PRs whose titles are 100,000-character runs (CJK, tags,
   brackets, backticks, cue words, emoji); `change_groups` on a body of many cues.
2. A whitespace run of 100,000 characters in a title: display, normalise, group.
3. 3,000 PRs of one title; of one file set; 300 and 3,000 distinct similar titles on one file set
   (compared pairwise by design: the last one is quadratic).
4. `clean_title` and `title_terms` on 1,000,000-character titles.

Before the fixes, `display_title("a" + " " * 100_000 + "x")` took 70 s; the tests' bound
(`HANG`, 10 s) is met by everything here with a margin of thousands.

Run: .venv/bin/python bench/hostile_inputs.py [--runs 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _stack import load_note  # noqa: E402

from tracker.core import groups, titles  # noqa: E402
from tracker.core.groups import GroupInput, change_groups, display_title, normalise_title  # noqa: E402
from tracker.core.titles import clean_title, title_terms  # noqa: E402

FILES = frozenset({"megatron/training/arguments.py"})


def pr(number: int, title: str, base: str = "main", body: str = "", files: frozenset[str] = frozenset()) -> GroupInput:
    return GroupInput(number=number, title=title, body=body, base_ref=base, files=files)


def fastest(call: Callable[[], object], runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        for module in (groups, titles):
            for value in vars(module).values():
                if hasattr(value, "cache_clear"):
                    value.cache_clear()
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best * 1000


def cases() -> dict[str, Callable[[], object]]:
    found: dict[str, Callable[[], object]] = {}
    long_titles = {
        "cjk": "修复路由负载均衡 " * 20_000,
        "tags": "[dev]" * 30_000 + " Fix",
        "open-brackets": "Fix [" * 30_000,
        "parentheses": "(" * 100_000,
        "backticks": "`" * 100_000,
        "cp": "cp: " * 30_000,
        "into": "into " * 30_000 + "x",
        "emoji": "\U0001f680 emoji " * 20_000,
    }
    for name, title in long_titles.items():
        prs = [pr(1, title), pr(2, title, "dev"), pr(3, "Unrelated change here")]
        found[f"1. long title ({name}): groups + display"] = lambda p=prs, t=title: (change_groups(p), display_title(t))
    body = "cherry-pick of #1 and " * 20_000 + "cp " * 50_000 + "mirror " + "x" * 100_000 + " #1"
    cued = [pr(1, "Speed up the checkpoint loader", files=frozenset({"a.py"})), pr(2, "Loader fix", "dev", body)]
    found["1. body of many cues: groups"] = lambda: change_groups(cued)
    run = "a" + " " * 100_000 + "x into `dev`"
    spaced = [pr(1, run, body="cherry-pick of " * 5000), pr(2, run, "dev")]
    found["2. 100,000-space run: display + normalise + groups"] = lambda: (
        display_title(run),
        normalise_title(run),
        change_groups(spaced),
    )
    one_title = [pr(n, "Update the dependency pins", "main" if n % 2 else "dev") for n in range(1, 3001)]
    one_files = [pr(n, "Update the dependency pins", "main" if n % 2 else "dev", files=FILES) for n in range(1, 3001)]
    found["3. 3,000 PRs, one title"] = lambda: change_groups(one_title)
    found["3. 3,000 PRs, one title, one file"] = lambda: change_groups(one_files)
    for count in (300, 3000):
        distinct = [
            pr(n, f"Change number {n} here", "main" if n % 2 else "dev", files=FILES) for n in range(1, count + 1)
        ]
        found[f"3. {count:,} distinct similar titles, one file"] = lambda d=distinct: change_groups(d)
    huge = 1_000_000
    for name, title in {
        "brackets": "[" * huge,
        "spaces-between": "a" + " " * huge + "x",
        "a-dash": "a-" * (huge // 2),
    }.items():
        found[f"4. clean_title ({name}, 1,000,000 chars)"] = lambda t=title: clean_title(t)
        found[f"4. title_terms ({name}, 1,000,000 chars)"] = lambda t=title: title_terms(t)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    print(f"fastest of {runs} runs, ms; {load_note()}")
    for name, call in cases().items():
        print(f"{fastest(call, runs):10.2f}  {name}")


if __name__ == "__main__":
    main()
