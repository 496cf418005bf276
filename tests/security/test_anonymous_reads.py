"""Issue 8, item 7: anonymous GETs of every cutoff and language cannot grow Redis without bound."""

from __future__ import annotations

import pytest
from flask import Flask
from flask.testing import FlaskClient

from bench.fixtures.paths import needs_shared
from tests.support.app import fixture_payload, post, run_jobs
from tracker.reports import cache
from tracker.web.context import services

pytestmark = needs_shared


def test_every_cutoff_in_both_languages_keeps_the_cache_within_its_bound(
    app: Flask, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache, "MAX_ENTRIES", 10)
    assert post(client, fixture_payload("pull_request.opened.json"), "pull_request", "one").status_code == 202
    run_jobs(app)
    asked = 0
    for day in range(1, 32):
        for name, lang in (
            ("2019-05.md", "en"),
            ("2019-05.md", "zh-CN"),
            ("2019-05.html", "en"),
            ("2019-05.json", "en"),
        ):
            answer = client.get(
                f"/reports/Codertocat/Hello-World/{name}", query_string={"cutoff": f"2019-05-{day:02d}", "lang": lang}
            )
            assert answer.status_code == 200
            asked += 1
    assert asked == 124
    with app.app_context():
        redis = services().require_redis()
        keys = list(redis.scan_iter(match="tracker:render:*"))
        assert len(keys) == 10
        assert all(0 < redis.ttl(key) <= cache.CACHE_SECONDS for key in keys)
        assert redis.zcard(cache.INDEX) == 10
