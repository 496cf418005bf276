"""The web server bench/ingest.py measures: the tracker's app, plus a bare baseline route on it.

`POST /bare` reads the body and answers 202 with no other work, so the baseline runs in the same
gunicorn master, the same worker processes and the same Flask app as `POST /webhook`. The server is
tracker.server.WebServer (what `tracker web` runs: gunicorn with its buffering worker), only loading this app instead.

    python bench/ingest_app.py --port 8000 --processes 2   # settings from the environment
"""

from __future__ import annotations

import argparse
from typing import Any

from flask import Flask, request

from tracker.settings import Settings, load_settings
from tracker.web.app import create_app
from tracker.web.server import WebServer


def create_bench_app(settings: Settings | None = None) -> Flask:
    app = create_app(settings)

    @app.post("/bare")
    def bare() -> Any:
        # Read the body as /webhook does: leaving 25 KB unread and closing makes the kernel send
        # a reset, which is neither realistic nor free.
        request.get_data(cache=False)
        return "", 202

    return app


class BenchServer(WebServer):
    def load(self) -> Any:
        return self.serving(create_bench_app(self.settings))  # as `tracker web`: its drain asker started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    settings = load_settings()
    create_bench_app(settings)  # as `tracker web` does: fail once, clearly, before forking workers
    BenchServer(settings, args.host, args.port, args.processes).run()


if __name__ == "__main__":
    main()
