"""`tracker/services.py`: the one services object the web app, the workers and the CLI share."""

from __future__ import annotations

from pathlib import Path

import pytest
from flask import Flask

from bench.fixtures.paths import needs_shared
from tracker.services import Services
from tracker.settings import Settings, SettingsError, load_settings
from tracker.web.app import create_app
from tracker.web.context import services
from workers import runtime


@needs_shared
def test_from_settings_opens_the_ledger_and_redis(settings: Settings) -> None:
    built = Services.from_settings(settings)
    try:
        assert built.redis is not None and built.redis.ping()
        assert built.ledger.engine is built.state.engine is built.heads.engine  # one pool per process
        assert built.delivery_queue.name == "deliveries" and built.github_queue.name == "github"
        assert built.delivery_queue is built.delivery_queue  # built once
        assert built.webhook_secret == b"test-webhook-secret"
        assert built.ledger.counts().received == 0  # the schema exists
        assert built.quota() is not None
    finally:
        built.close()
        built.close()  # closing twice is harmless


def test_without_redis_the_queue_is_refused_with_a_reason(tmp_path: Path) -> None:
    built = Services.from_settings(load_settings(data_dir=tmp_path / "var"), redis=False)
    try:
        assert built.redis is None and built.quota() is None
        with pytest.raises(SettingsError, match="without Redis"):
            _ = built.delivery_queue
    finally:
        built.close()


def test_no_redis_anywhere_says_what_to_do(tmp_path: Path, no_tracker_environment: None) -> None:
    with pytest.raises(SettingsError, match="REDIS_URL is not set.*tracker run"):
        Services.from_settings(load_settings(data_dir=tmp_path / "var"))
    assert not (tmp_path / "var" / "ledger.sqlite3").exists()  # nothing opened before the error


def test_a_missing_secret_is_a_start_up_error_of_the_web_app(tmp_path: Path, no_tracker_environment: None) -> None:
    with pytest.raises(SettingsError, match="TRACKER_WEBHOOK_SECRET is not set"):
        create_app(load_settings(data_dir=tmp_path / "var", redis_url="redis://127.0.0.1:1/0"))


@needs_shared
def test_the_app_and_the_jobs_share_one_object(app: Flask) -> None:
    with app.app_context():
        assert runtime.current() is services()  # installed by tests.conftest.running_app, as `tracker worker` does


@needs_shared
def test_an_app_can_be_built_around_given_services(settings: Settings) -> None:
    built = Services.from_settings(settings)
    try:
        app = create_app(services=built)
        with app.app_context():
            assert services() is built
    finally:
        built.close()
