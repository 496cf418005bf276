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
