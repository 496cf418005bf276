"""The services object that job functions work with in this process.

A worker process installs the one it built at start-up (`install`); job functions look it up with
`current()`. A process that never installed one (RQ started some other way) builds it from the
environment on first use. Tests install the app's own.
"""

from __future__ import annotations

from tracker.services import Services
from tracker.settings import load_settings

_installed: Services | None = None


def install(services: Services | None) -> None:
    global _installed
    _installed = services


def current() -> Services:
    global _installed
    if _installed is None:
        _installed = Services.from_settings(load_settings())
    return _installed
