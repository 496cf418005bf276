"""The production WSGI server (gunicorn, sync workers) for `tracker web` and `tracker run`.

Sync workers, not gthread: with keep-alive, a few long-lived client connections can all land on
one gthread worker and halve throughput (MEASURED.md).
"""

from __future__ import annotations

from typing import Any

from gunicorn.app.base import BaseApplication

from tracker.settings import Settings
from tracker.web.app import create_app


class WebServer(BaseApplication):  # type: ignore[misc]
    def __init__(self, settings: Settings, host: str, port: int, processes: int) -> None:
        self.settings = settings
        self.options = {
            "bind": f"{host}:{port}",
            "workers": processes,
            "worker_class": "sync",
            "timeout": 30,
            "graceful_timeout": 10,
            "accesslog": None,
            "errorlog": "-",
            "loglevel": "info",
            # Several servers can run on one machine (tests, benchmarks): no shared control socket.
            "control_socket_disable": True,
        }
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        # Called in each worker after the fork: every process opens its own database and Redis pools.
        return create_app(self.settings)
