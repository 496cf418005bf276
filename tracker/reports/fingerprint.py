"""What produced a derived value: a digest of the sources that compute it, in the keys of the caches
(tracker.reports.cache, tracker.reports.groupings), so that an upgrade that changes any of them never
serves what the old code made."""

from __future__ import annotations

import hashlib
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent  # tracker/


def code_fingerprint(*folders: tuple[str, str]) -> str:
    """A digest of the files of `tracker/` matching each (folder, glob pattern), by name and content."""
    digest = hashlib.sha256()
    for folder, pattern in folders:
        for path in sorted((_PACKAGE / folder).glob(pattern)):
            if path.is_file():
                digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()
