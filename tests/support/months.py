"""Months delivered once in a test session, each test starting from a copy of one.

Delivering a month through the webhook and the worker's jobs (`app.deliver_month`) takes 5 to 15 s. Here
each month (a scenario and a configuration, under a name) is delivered once in the session, by the first
test process that asks for it (pytest-xdist's workers share it: a lock file each, beside the months, in
the session's temporary directory), into a database of its own, and every test that asks for it gets a
copy of that database, taken in a fraction of a second: SQLite's backup of the file (and of its inbox),
PostgreSQL's `CREATE DATABASE ... TEMPLATE`. A test may change its copy as it likes (prose stored, records
frozen, deliveries added, a backfill); a module whose tests only read the month shares one app over one
copy (`month_app`). A month that extends another (the same deliveries, then more) is that month's copy
with the rest delivered (`base`), as `deliver_month` would have delivered them after it.

The copy holds what the delivery left in the database; Redis, emptied around every test, starts empty (a
report is read from the database, as after a restart), and the fake GitHub is shown the month's heads
again (`show_month`), as the delivery showed them.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from flask import Flask
from flask.testing import FlaskClient
from redis import Redis
from sqlalchemy import create_engine
from sqlalchemy.engine import URL, make_url

from bench.fixtures.scenario import REPO, MonthScenario
from tests.support.app import ACTIVE_GITHUB, deliver_month, running_app
from tracker.settings import Settings

# A month another extends: its name and its scenario.
Base = tuple[str, MonthScenario]


class Months:
    """The session's months (`tests/conftest.py`'s `months` fixture): in `directory`, which the session's
    processes share, and on PostgreSQL beside `database_url`, the session's test database as named
    before each pytest-xdist worker got its own."""

    def __init__(self, directory: Path, database_url: str | None) -> None:
        self.directory = directory
        self.database_url = database_url
        self.known: dict[tuple[str, str], str] = {}  # (name, kind of database) -> its database, in this process

    def copy(
        self, name: str, scenario: MonthScenario, settings: Settings, github: Any, base: Base | None = None
    ) -> Settings:
        """`settings` over a copy of the month `name`: `scenario` delivered with `settings` (the same scenario
        and configuration each time; `base`, a month whose deliveries `scenario` begins with, delivered
        first) the first time any test asks for it. On SQLite the copy is the test's own ledger file (which
        must not exist yet), on PostgreSQL a database beside the test's (`<its name>_copy`, replaced). The
        fake `github` knows the month's heads, as after a delivery."""
        target = make_url(settings.database_url or "")
        source = make_url(self.month(name, scenario, settings, github, base))
        show_month(scenario, github)
        if target.get_backend_name() == "sqlite":
            copy_sqlite(Path(source.database or ""), Path(target.database or ""))
            return settings
        copy = target.set(database=f"{target.database}_copy")
        self.copy_postgresql(source, copy)
        return settings.model_copy(update={"database_url": copy.render_as_string(hide_password=False)})

    def month(self, name: str, scenario: MonthScenario, settings: Settings, github: Any, base: Base | None) -> str:
        """The URL of the month's database, delivered first if no process of the session did; what was
        delivered (its configuration and deliveries) is checked to be what is asked for."""
        kind = make_url(settings.database_url or "").get_backend_name()
        config = Path(settings.config_path).read_text() if settings.config_path else ""
        ids = [d.delivery_id for story in scenario.stories for d in story.deliveries]
        what = hashlib.sha256(json.dumps([config, ids]).encode()).hexdigest()
        if (name, kind) in self.known:
            return self.known[(name, kind)]
        self.directory.mkdir(parents=True, exist_ok=True)
        record = self.directory / f"{name}.{kind}.json"
        with open(self.directory / f"{name}.{kind}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process delivering it: wait for it
            if not record.exists():
                url = self.deliver(name, kind, scenario, settings, github, base)
                record.write_text(json.dumps({"database": url, "what": what}))
            delivered = json.loads(record.read_text())
        assert delivered["what"] == what, f"the month {name} was delivered with other deliveries or configuration"
        self.known[(name, kind)] = delivered["database"]
        return str(delivered["database"])

    def deliver(
        self, name: str, kind: str, scenario: MonthScenario, settings: Settings, github: Any, base: Base | None
    ) -> str:
        """`scenario` through the webhook of an app over `settings` but for its database (SQLite
        `<name>.sqlite3` in the months' directory, PostgreSQL `<session database>_month_<name>`), every job
        run, the app closed (PostgreSQL copies a database nobody is connected to): after a copy of `base`,
        only the deliveries after the base's. The URL of that database. Redis (this process's test
        database) and the fake GitHub are emptied afterwards, as a test's fixtures empty them."""
        if kind == "sqlite":
            url: URL = make_url(f"sqlite:///{self.directory / name}.sqlite3")
            assert not Path(url.database or "").exists(), f"{url.database}: left by a delivery that failed"
        else:
            assert self.database_url is not None
            session = make_url(self.database_url)
            url = session.set(database=f"{session.database}_month_{name}")
        stories = scenario.stories
        if base is not None:
            base_name, base_scenario = base
            source = make_url(self.month(base_name, base_scenario, settings, github, None))
            ids = [[d.delivery_id for d in story.deliveries] for story in base_scenario.stories]
            assert ids == [[d.delivery_id for d in story.deliveries] for story in stories[: len(ids)]], (
                f"the month {name} does not begin with the deliveries of {base_name}"
            )
            if kind == "sqlite":
                copy_sqlite(Path(source.database or ""), Path(url.database or ""))
            else:
                self.copy_postgresql(source, url)
            show_month(base_scenario, github)  # the fake GitHub as the base's delivery left it
            stories = stories[len(ids) :]
        elif kind != "sqlite":
            self.copy_postgresql(None, url)
        active = list(ACTIVE_GITHUB)
        ACTIVE_GITHUB[:] = [github]
        own = url.render_as_string(hide_password=False)
        delivering = settings.model_copy(update={"database_url": own, "data_dir": self.directory / name})
        try:
            with running_app(delivering) as app:
                deliver_month(MonthScenario(stories, scenario.files), app, app.test_client(), github)
        finally:
            ACTIVE_GITHUB[:] = active
        redis = Redis.from_url(settings.redis_url or "")
        try:
            redis.flushdb()
        finally:
            redis.close()
        github.reset()
        return own

    def copy_postgresql(self, source: URL | None, target: URL) -> None:
        """The database `target` made anew: a copy of `source`, or empty (its tables made when first opened).
        Asked through the session's test database, which is neither."""
        assert self.database_url is not None
        engine = create_engine(self.database_url, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{target.database}" WITH (FORCE)')
                template = f' TEMPLATE "{source.database}"' if source is not None else ""
                conn.exec_driver_sql(f'CREATE DATABASE "{target.database}"{template}')
        finally:
            engine.dispose()


@contextmanager
def month_app(
    months: Months, name: str, scenario: MonthScenario, settings: Settings, github: Any, base: Base | None = None
) -> Iterator[tuple[Flask, FlaskClient]]:
    """An app over a copy of the month (`Months.copy`): what a module's tests share when they only read it.
    Redis is emptied first, as a process that never served the month finds it (`settings`' Redis is not
    emptied around each test, unless the test asks for the `redis_url` fixture)."""
    copied = months.copy(name, scenario, settings, github, base)
    redis = Redis.from_url(settings.redis_url or "")
    try:
        redis.flushdb()
    finally:
        redis.close()
    with running_app(copied) as app:
        yield app, app.test_client()


def copy_sqlite(source: Path, target: Path) -> None:
    """The ledger file and its inbox (`ledger.inbox.sqlite3`, tracker.store.inbox), each through SQLite's
    backup, which copies what its write-ahead log holds too."""
    assert not target.exists(), f"{target} exists: the copy would not be the month alone"

    def inbox(path: Path) -> Path:
        return path.with_name(f"{path.stem}.inbox{path.suffix}")

    for read, written in ((source, target), (inbox(source), inbox(target))):
        if read.exists():
            with closing(sqlite3.connect(read)) as src, closing(sqlite3.connect(written)) as dst:
                src.backup(dst)


def show_month(scenario: MonthScenario, github: Any) -> None:
    """What `app.deliver_month` shows the fake GitHub, in its order, without delivering anything: each
    head's files, and the heads the pull_request deliveries carry (`app.show_head_to_github`)."""
    heads = {(number, sha): paths for number, sha, paths in scenario.head_files()}
    for story in scenario.stories:
        for d in story.deliveries:
            document = json.loads(d.body)
            pr = document["pull_request"]
            if (story.number, pr["head"]["sha"]) in heads:
                github.set_files(REPO, story.number, pr["head"]["sha"], heads[(story.number, pr["head"]["sha"])])
            if d.event == "pull_request":
                github.saw_head(document["repository"]["full_name"], pr["number"], pr["head"]["sha"], pr["updated_at"])
