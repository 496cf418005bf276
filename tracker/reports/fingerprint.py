"""What produced a kept value: one fingerprint of the release and of every source that computes or renders a
report (tracker.core, tracker.store, tracker.reports and its templates, and the features a report reads:
tracker.history, tracker.records, tracker.narration), in the key of every report cache (the
rendered documents, tracker.reports.cache; the month digests, tracker.reports.digests; the groupings,
tracker.reports.groupings), so that an upgrade that changes any of them never serves what the old code made.
One fingerprint for all of them: an upgrade that changes one source makes each cache miss once, which costs a
worker's warm job, and nobody has to decide which sources a cache depends on."""

from __future__ import annotations

import hashlib
from pathlib import Path

from tracker import __version__

_PACKAGE = Path(__file__).resolve().parent.parent  # tracker/
SOURCES = (
    ("core", "*.py"),
    ("store", "*.py"),
    ("reports", "*.py"),
    ("reports/templates", "*"),
    ("history", "*.py"),
    ("records", "*.py"),
    ("narration", "*.py"),
)


def code_fingerprint() -> str:
    """A digest of the release and of the files of `tracker/` in SOURCES (each folder, glob pattern), by
    name and content."""
    digest = hashlib.sha256(__version__.encode() + b"\0")
    for folder, pattern in SOURCES:
        for path in sorted((_PACKAGE / folder).glob(pattern)):
            if path.is_file():
                digest.update(f"{folder}/{path.name}".encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


CODE = code_fingerprint()
