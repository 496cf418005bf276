"""Where the tests find the project and the shared data (../shared next to the clone, or
TRACKER_SHARED_DIR)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
if not SHARED.exists():  # CI clones next to shared/; a checkout elsewhere can point at it
    SHARED = Path(os.environ.get("TRACKER_SHARED_DIR", "../shared")).resolve()
FIXTURES = SHARED / "fixtures" / "github"
WEBHOOKS = FIXTURES / "webhooks"
MEGATRON = SHARED / "data" / "megatron" / "merged-prs-2026-03-to-06.jsonl"
EXAMPLES = ROOT / "examples"

# Tests that read ../shared (GitHub's example payloads and answers, the Megatron-LM data) are skipped,
# with this reason, in a clone without it; everything else still runs.
SHARED_MISSING = not SHARED.is_dir()
SHARED_REASON = f"needs the shared fixtures and data at {SHARED} (../shared next to the clone, or TRACKER_SHARED_DIR)"

try:  # the benchmarks and tools/make_demo.py read these paths where pytest may not be installed
    import pytest
except ImportError:  # pragma: no cover
    pass
else:
    needs_shared = pytest.mark.skipif(SHARED_MISSING, reason=SHARED_REASON)


def require_shared() -> None:
    """Skip the whole module here (before it imports a helper that reads ../shared as it loads)."""
    if SHARED_MISSING:
        import pytest

        pytest.skip(SHARED_REASON, allow_module_level=True)
