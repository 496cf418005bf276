"""`tracker/github/app.py`: authenticating as a GitHub App, against a fake GitHub of this file's own.

The fake serves what a GitHub App needs: `GET /repos/{o}/{r}/installation` and `POST
/app/installations/{id}/access_tokens` (both checking the App's JWT with the App's public key and
GitHub's rules for its claims), and `GET /repos/{o}/{r}/pulls/{n}/files` (checking the installation
token, or the personal token). Time is a `Clock` the test moves, shared by the App and the fake.
"""

from __future__ import annotations

import copy
import json
import logging
import re
import secrets
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from redis import Redis
from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from bench.fixtures.paths import FIXTURES, require_shared
from tests.support.app import SECRET, fixture_payload, post, run_jobs, running_app
from tracker.github.app import TOKEN_MARGIN, AppNotInstalled, GitHubApp
from tracker.github.client import BadAnswer, GitHubClient, RequestRefused
from tracker.services import Services
from tracker.settings import Settings, SettingsError, load_settings
from tracker.store.installations import InstallationStore
from workers.jobs import fetch_head_files
from workers.runtime import current

require_shared()  # GitHub's example answers below come from ../shared

APP_ID = 424242
PERSONAL_TOKEN = "ghp_personal-token-for-tests"
REPO = "octo-org/with-app"
INSTALLATION = 5150
pytestmark = pytest.mark.usefixtures("no_tracker_environment")

APP_VARIABLES = ("TRACKER_GITHUB_APP_ID", "TRACKER_GITHUB_APP_PRIVATE_KEY", "TRACKER_GITHUB_APP_PRIVATE_KEY_FILE")

_FILES = json.loads((FIXTURES / "rest" / "pulls.list-files.200.json").read_text())
# The head the example listing was made at (its entries' `contents_url` say `?ref=<sha>`).
FILES_HEAD = "6dcb09b5b57875f334f61aebed695e2e4193db5e"

# ../shared/fixtures/github/rest/ holds no example of `GET /repos/{owner}/{repo}/installation`, so this
# body is shaped on GitHub's OpenAPI description of the answer (`#/components/schemas/installation`,
# "Get a repository installation for the authenticated app", with the schema's example values).
_INSTALLATION: dict[str, Any] = {
    "id": 1,
    "account": {
        "login": "octo-org",
        "id": 1,
        "node_id": "MDQ6VXNlcjE=",
        "avatar_url": "https://github.com/images/error/octocat_happy.gif",
        "url": "https://api.github.com/users/octo-org",
        "html_url": "https://github.com/octo-org",
        "type": "Organization",
        "site_admin": False,
    },
    "repository_selection": "selected",
    "access_tokens_url": "https://api.github.com/app/installations/1/access_tokens",
    "repositories_url": "https://api.github.com/installation/repositories",
    "html_url": "https://github.com/organizations/github/settings/installations/1",
    "app_id": 1,
    "target_id": 1,
    "target_type": "Organization",
    "permissions": {"contents": "read", "issues": "write", "pull_requests": "read", "metadata": "read"},
    "events": ["pull_request"],
    "single_file_name": None,
    "has_multiple_single_files": False,
    "single_file_paths": [],
    "app_slug": "monthly-activity-tracker",
    "created_at": "2018-02-09T20:51:14Z",
    "updated_at": "2018-02-09T20:51:14Z",
    "suspended_by": None,
    "suspended_at": None,
}


class Clock:
    def __init__(self) -> None:
        self.now = float(int(datetime.now(UTC).timestamp()))

    def __call__(self) -> float:
        return self.now


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass


class FakeAppGitHub:
    """GitHub as a GitHub App sees it. `installed` maps repository keys to installation ids."""

    def __init__(self, public_key: rsa.RSAPublicKey, clock: Callable[[], float]) -> None:
        self.public_key = public_key
        self.clock = clock
        self.installed: dict[str, int] = {}
        self.issued: dict[str, tuple[int, float]] = {}  # token → (installation, expires at)
        self.requests: list[tuple[str, str]] = []  # (method, path)
        self.jwts: list[str] = []  # every JWT presented, valid or not
        self.claims: list[dict[str, Any]] = []  # the claims of the valid ones
        self.file_tokens: list[str] = []  # the bearer tokens the files requests carried
        self.files_link: str | None = None  # a `Link` header for the files answers
        self._lock = threading.Lock()
        self._server = make_server("127.0.0.1", 0, self._app, threaded=True, request_handler=_QuietHandler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()

    def paths(self, method: str | None = None) -> list[str]:
        return [path for m, path in self.requests if method is None or m == method]

    def _app(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        with self._lock:
            self.requests.append((request.method, request.path))
            response = self._answer(request)
        return response(environ, start_response)

    def _answer(self, request: Request) -> Response:
        bearer = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if request.method == "GET" and (match := re.fullmatch(r"/repos/([^/]+/[^/]+)/installation", request.path)):
            refused = self.check_jwt(bearer)
            if refused is not None:
                return refused
            installation = self.installed.get(match.group(1).lower())
            if installation is None:
                return _json(
                    {
                        "message": "Not Found",
                        "documentation_url": "https://docs.github.com/rest/apps/apps#get-a-repository-installation-for-the-authenticated-app",
                        "status": "404",
                    },
                    404,
                )
            body = copy.deepcopy(_INSTALLATION)
            body["id"] = installation
            body["access_tokens_url"] = f"https://api.github.com/app/installations/{installation}/access_tokens"
            return _json(body)
        if request.method == "POST" and (
            match := re.fullmatch(r"/app/installations/(\d+)/access_tokens", request.path)
        ):
            refused = self.check_jwt(bearer)
            if refused is not None:
                return refused
            installation = int(match.group(1))
            if installation not in self.installed.values():
                return _json({"message": "Not Found", "status": "404"}, 404)
            token = f"ghs_{secrets.token_hex(18)}"
            expires = self.clock() + 3600  # GitHub: an installation access token expires after one hour
            self.issued[token] = (installation, expires)
            expires_at = datetime.fromtimestamp(expires, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            return _json(
                {
                    "token": token,
                    "expires_at": expires_at,
                    "permissions": _INSTALLATION["permissions"],
                    "repository_selection": "selected",
                },
                201,
            )
        if request.method == "GET" and (match := re.fullmatch(r"/repos/([^/]+/[^/]+)/pulls/\d+/files", request.path)):
            self.file_tokens.append(bearer)
            if not self._may_read(bearer, match.group(1).lower()):
                return _json({"message": "Bad credentials", "status": "401"}, 401)
            answer = _json(_FILES)
            if self.files_link is not None:
                answer.headers["Link"] = self.files_link
            return answer
        return _json({"message": "Not Found"}, 404)

    def check_jwt(self, presented: str) -> Response | None:
        """GitHub's rules for an App's JWT: RS256, signed by the App's key, `iss` the App's id, `iat`
        not in the future and `exp` at most 10 minutes after it, not expired."""
        self.jwts.append(presented)
        try:
            claims = jwt.decode(
                presented,
                self.public_key,
                algorithms=["RS256"],
                options={"verify_exp": False, "verify_iat": False, "require": ["iat", "exp", "iss"]},
            )
        except jwt.PyJWTError:
            return _json({"message": "A JSON web token could not be decoded", "status": "401"}, 401)
        now = self.clock()
        if str(claims["iss"]) != str(APP_ID):
            return _json({"message": "Integration not found", "status": "401"}, 401)
        if not claims["iat"] <= now < claims["exp"] or claims["exp"] - claims["iat"] > 600:
            return _json({"message": "'Expiration time' claim ('exp') is too far in the future", "status": "401"}, 401)
        self.claims.append(claims)
        return None

    def _may_read(self, token: str, repo: str) -> bool:
        if token == PERSONAL_TOKEN:
            return True
        issued = self.issued.get(token)
        if issued is None:
            return False
        installation, expires = issued
        return self.installed.get(repo) == installation and self.clock() < expires


def _json(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body), status=status, content_type="application/json")


def _pem(key: rsa.RSAPrivateKey) -> str:
    # GitHub's App keys come as PKCS#1 ("-----BEGIN RSA PRIVATE KEY-----").
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    ).decode()


@pytest.fixture(scope="module")
def private_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def pem(private_key: rsa.RSAPrivateKey) -> str:
    return _pem(private_key)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def fake(private_key: rsa.RSAPrivateKey, clock: Clock) -> Iterator[FakeAppGitHub]:
    server = FakeAppGitHub(private_key.public_key(), clock)
    server.installed[REPO] = INSTALLATION
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(autouse=True)
def _no_app_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in APP_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def redis(redis_url: str) -> Iterator[Redis]:
    connection = Redis.from_url(redis_url)
    try:
        yield connection
    finally:
        connection.close()


def make_app(pem: str, fake: FakeAppGitHub, clock: Clock, redis: Redis | None = None) -> GitHubApp:
    return GitHubApp(APP_ID, pem, fake.url, redis=redis, clock=clock, attempts=1)


def app_settings(
    tmp_path: Path, fake: FakeAppGitHub, pem: str, redis_url: str, *, token: str | None = None
) -> Settings:
    return load_settings(
        github_api_url=fake.url,
        github_app_id=APP_ID,
        github_app_private_key=pem,
        github_token=token,
        webhook_secret=SECRET,
        data_dir=tmp_path / "var",
        database_url=f"sqlite:///{tmp_path / 'ledger.sqlite3'}",
        redis_url=redis_url,
        timezone="UTC",
    )


# --- the JWT ---------------------------------------------------------------------------------------


def test_the_jwt_is_rs256_signed_by_the_app_and_short_lived(
    pem: str, private_key: rsa.RSAPrivateKey, fake: FakeAppGitHub, clock: Clock
) -> None:
    app = make_app(pem, fake, clock)
    token = app.jwt()
    assert jwt.get_unverified_header(token)["alg"] == "RS256"
    claims = jwt.decode(token, private_key.public_key(), algorithms=["RS256"], options={"verify_exp": False})
    # GitHub's docs: iat 60 s in the past (clock drift), exp no more than 10 minutes ahead, iss the App.
    assert claims == {"iat": int(clock.now) - 60, "exp": int(clock.now) + 9 * 60, "iss": str(APP_ID)}
    assert app.installation_for(REPO) == INSTALLATION  # the fake accepted it
    assert fake.claims and fake.claims[-1]["iss"] == str(APP_ID)
    clock.now += 9 * 60  # a JWT made 9 minutes ago is expired: each request gets a new one
    assert fake.check_jwt(token) is not None
    assert app.installation_token(INSTALLATION).startswith("ghs_")
    assert fake.jwts[-1] != token and fake.claims[-1]["iat"] == int(clock.now) - 60


def test_a_jwt_signed_with_another_key_is_refused_without_quoting_it(
    fake: FakeAppGitHub, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    other = _pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    app = make_app(other, fake, clock)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(RequestRefused) as caught:
        app.token_for(REPO)
    assert caught.value.status == 401
    assert "could not be decoded" in str(caught.value)
    for secret in [*fake.jwts, *other.splitlines()[1:-1]]:
        assert secret not in str(caught.value) and secret not in caplog.text and secret not in repr(app)


# --- installation tokens -------------------------------------------------------------------------------


def test_a_token_is_reused_until_five_minutes_before_it_expires(pem: str, fake: FakeAppGitHub, clock: Clock) -> None:
    app = make_app(pem, fake, clock)
    first = app.token_for(REPO)
    assert fake.paths() == [f"/repos/{REPO}/installation", f"/app/installations/{INSTALLATION}/access_tokens"]
    clock.now += 3600 - TOKEN_MARGIN - 1  # one second before the margin
    assert app.token_for(REPO) == first
    assert len(fake.paths("POST")) == 1
    clock.now += 2  # inside the last five minutes: a new token, and no new lookup
    second = app.token_for(REPO)
    assert second != first and second in fake.issued
    assert fake.paths("POST") == [f"/app/installations/{INSTALLATION}/access_tokens"] * 2
    assert len(fake.paths("GET")) == 1


def test_two_apps_sharing_redis_mint_once(pem: str, fake: FakeAppGitHub, clock: Clock, redis: Redis) -> None:
    one, two = make_app(pem, fake, clock, redis), make_app(pem, fake, clock, redis)
    token = one.token_for(REPO)
    assert two.token_for(REPO, INSTALLATION) == token  # another worker process: from Redis
    assert len(fake.paths("POST")) == 1
    key = f"tracker:github:app-token:{INSTALLATION}"
    assert 3600 - TOKEN_MARGIN - 5 <= redis.ttl(key) <= 3600 - TOKEN_MARGIN  # its remaining useful life
    clock.now += 3600 - TOKEN_MARGIN + 1  # Redis's copy is past its use too (by the clock that matters)
    assert two.token_for(REPO, INSTALLATION) != token
    assert len(fake.paths("POST")) == 2


def test_a_known_installation_skips_the_lookup(pem: str, fake: FakeAppGitHub, clock: Clock) -> None:
    app = make_app(pem, fake, clock)
    token = app.token_for(REPO, INSTALLATION)
    assert fake.paths() == [f"/app/installations/{INSTALLATION}/access_tokens"]
    assert fake.issued[token][0] == INSTALLATION


def test_a_stale_known_installation_is_looked_up_again(pem: str, fake: FakeAppGitHub, clock: Clock) -> None:
    app = make_app(pem, fake, clock)
    token = app.token_for(REPO, 77)  # the App was installed again since: 77 is gone
    assert fake.issued[token][0] == INSTALLATION
    assert fake.paths() == [
        "/app/installations/77/access_tokens",
        f"/repos/{REPO}/installation",
        f"/app/installations/{INSTALLATION}/access_tokens",
    ]


def test_without_the_app_the_personal_token_is_used(pem: str, fake: FakeAppGitHub, clock: Clock) -> None:
    app = make_app(pem, fake, clock)
    assert app.token_for("octo-org/no-app", fallback=PERSONAL_TOKEN) == PERSONAL_TOKEN
    assert app.token_for("octo-org/no-app", fallback=PERSONAL_TOKEN) == PERSONAL_TOKEN
    assert fake.paths() == ["/repos/octo-org/no-app/installation"]  # the answer is remembered a while
    with pytest.raises(AppNotInstalled) as caught:
        app.token_for("octo-org/no-app")
    assert str(caught.value) == "the GitHub App is not installed on octo-org/no-app: install it, or set GITHUB_TOKEN"
    assert caught.value.status == 403  # not a 404: that would read as "the PR is gone"


def test_repository_names_are_checked_before_any_request(pem: str, fake: FakeAppGitHub, clock: Clock) -> None:
    app = make_app(pem, fake, clock)
    with pytest.raises(ValueError):
        app.token_for("x/../../app/installations")
    assert fake.requests == []


# --- through the services object: one client per job -------------------------------------------------


def test_the_services_client_authenticates_as_the_installation(
    tmp_path: Path, pem: str, fake: FakeAppGitHub, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    settings = app_settings(tmp_path, fake, pem, redis_url, token=PERSONAL_TOKEN)
    services = Services.from_settings(settings)
    try:
        with services.github(REPO) as client:
            assert [f["filename"] for f in client.pull_request_files(REPO, 1)] == ["file1.txt"]
            client.pull_request_files(REPO, 1)
        with services.github("octo-org/no-app") as client:  # not installed there: GITHUB_TOKEN
            client.pull_request_files("octo-org/no-app", 1)
        with services.github() as client:  # no repository named: GITHUB_TOKEN, as before
            client.pull_request_files(REPO, 1)
        app_token = next(iter(fake.issued))
        assert fake.file_tokens == [app_token, app_token, PERSONAL_TOKEN, PERSONAL_TOKEN]
        assert len(fake.paths("POST")) == 1
        text = caplog.text + repr(settings) + str(settings) + repr(services) + repr(services.github_app)
        for secret in [app_token, *fake.jwts, *pem.splitlines()[1:-1]]:
            assert secret not in text
    finally:
        services.close()


def test_the_services_client_says_what_to_do_without_app_or_token(
    tmp_path: Path, pem: str, fake: FakeAppGitHub, redis_url: str
) -> None:
    services = Services.from_settings(app_settings(tmp_path, fake, pem, redis_url))
    try:
        with services.github("octo-org/no-app") as client, pytest.raises(RequestRefused) as caught:
            client.pull_request_files("octo-org/no-app", 1)
        assert "the GitHub App is not installed on octo-org/no-app: install it, or set GITHUB_TOKEN" in str(
            caught.value
        )
        assert fake.paths() == ["/repos/octo-org/no-app/installation"]  # nothing sent without a token
    finally:
        services.close()


def test_a_client_asks_its_auth_for_every_request(fake: FakeAppGitHub) -> None:
    tokens = iter(["unknown", PERSONAL_TOKEN])
    with GitHubClient(fake.url, "ignored", auth=lambda: next(tokens), attempts=1) as client:
        with pytest.raises(RequestRefused):
            client.pull_request_files(REPO, 1)
        client.pull_request_files(REPO, 1)
    assert fake.file_tokens == ["unknown", PERSONAL_TOKEN]


def test_an_installation_token_never_leaves_the_api_origin(
    pem: str, private_key: rsa.RSAPrivateKey, fake: FakeAppGitHub, clock: Clock
) -> None:
    elsewhere = FakeAppGitHub(private_key.public_key(), clock)
    try:
        fake.files_link = f'<{elsewhere.url}/repos/{REPO}/pulls/1/files?page=2>; rel="next"'
        app = make_app(pem, fake, clock)
        client = GitHubClient(fake.url, auth=lambda: app.token_for(REPO), attempts=1)
        with pytest.raises(BadAnswer, match="another origin") as raised:
            client.pull_request_files(REPO, 1)
        assert fake.file_tokens == [next(iter(fake.issued))]  # the first page, with the installation's token
        assert elsewhere.requests == [] and elsewhere.file_tokens == []
        assert not any(token in str(raised.value) for token in fake.issued)
    finally:
        elsewhere.close()


def test_an_installation_named_by_a_webhook_is_recorded_and_then_used(
    tmp_path: Path, pem: str, fake: FakeAppGitHub, redis_url: str
) -> None:
    # A real GitHub App delivery (octokit's example): Codertocat/Hello-World, installation 1.
    payload = fixture_payload("pull_request.converted_to_draft.with-installation.json")
    full_name, installation = payload["repository"]["full_name"], payload["installation"]["id"]
    fake.installed["codertocat/hello-world"] = installation
    # The app here mints its JWT on the real clock, so the fake must judge it on the real clock too;
    # its frozen test clock falls more than the JWT's 60 s backdate behind on a busy machine.
    fake.clock = time.time
    settings = app_settings(tmp_path, fake, pem, redis_url)
    with running_app(settings) as app:
        response = post(app.test_client(), payload, "pull_request", "app-delivery-1")
        assert response.status_code == 202
        run_jobs(app)
        store = InstallationStore(current().state.engine)
        assert store.installation_for("codertocat/HELLO-world") == installation
        assert fetch_head_files(full_name, payload["number"], FILES_HEAD, "f" * 40) == "stored"
    assert fake.paths() == [  # no lookup: the delivery named the installation
        f"/app/installations/{installation}/access_tokens",
        f"/repos/{full_name}/pulls/{payload['number']}/files",
    ]
    assert fake.file_tokens == list(fake.issued)


def test_the_latest_installation_recorded_wins(tmp_path: Path) -> None:
    services = Services.from_settings(
        load_settings(data_dir=tmp_path / "var", database_url=f"sqlite:///{tmp_path / 'l.sqlite3'}"), redis=False
    )
    try:
        store = InstallationStore(services.state.engine)
        assert store.installation_for("octo-org/repo") is None
        store.record("octo-org/Repo", 1)
        store.record("octo-org/repo", 2)
        assert store.installation_for("OCTO-ORG/REPO") == 2
        with pytest.raises(ValueError):
            store.record("octo-org/repo", 0)
    finally:
        services.close()


# --- settings --------------------------------------------------------------------------------------


class TestSettings:
    def test_the_key_with_literal_newlines_is_read(self, monkeypatch: pytest.MonkeyPatch, pem: str) -> None:
        monkeypatch.setenv("TRACKER_GITHUB_APP_ID", str(APP_ID))
        monkeypatch.setenv("TRACKER_GITHUB_APP_PRIVATE_KEY", pem.strip().replace("\n", "\\n"))
        settings = load_settings()
        assert settings.github_app_credentials == (APP_ID, pem)
        for line in pem.splitlines()[1:-1]:
            assert line not in repr(settings) and line not in str(settings)

    def test_the_key_file_is_read_at_start_up(self, monkeypatch: pytest.MonkeyPatch, pem: str, tmp_path: Path) -> None:
        (tmp_path / "app.pem").write_text(pem)
        monkeypatch.setenv("TRACKER_GITHUB_APP_ID", str(APP_ID))
        monkeypatch.setenv("TRACKER_GITHUB_APP_PRIVATE_KEY_FILE", str(tmp_path / "app.pem"))
        settings = load_settings()
        assert settings.github_app_credentials == (APP_ID, pem)
        assert pem.splitlines()[1] not in repr(settings)

    def test_no_app_by_default(self) -> None:
        assert load_settings().github_app_credentials is None

    def test_an_id_without_a_key_says_what_to_set(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("TRACKER_GITHUB_APP_ID", str(APP_ID))
        with pytest.raises(
            SettingsError, match="^TRACKER_GITHUB_APP_ID is set but .*TRACKER_GITHUB_APP_PRIVATE_KEY_FILE"
        ):
            load_settings()

    def test_a_key_without_an_id_says_what_to_set(self, monkeypatch: pytest.MonkeyPatch, pem: str) -> None:
        monkeypatch.setenv("TRACKER_GITHUB_APP_PRIVATE_KEY", pem)
        with pytest.raises(
            SettingsError, match="^TRACKER_GITHUB_APP_PRIVATE_KEY is set but TRACKER_GITHUB_APP_ID is not"
        ):
            load_settings()

    @pytest.mark.parametrize("value", ["0", "-3", "app"])
    def test_the_id_is_a_positive_number(self, monkeypatch: pytest.MonkeyPatch, pem: str, value: str) -> None:
        monkeypatch.setenv("TRACKER_GITHUB_APP_ID", value)
        monkeypatch.setenv("TRACKER_GITHUB_APP_PRIVATE_KEY", pem)
        with pytest.raises(SettingsError, match="TRACKER_GITHUB_APP_ID") as caught:
            load_settings()
        assert pem.splitlines()[1] not in str(caught.value)

    @pytest.mark.parametrize("kind", ["missing", "directory"])
    def test_an_unreadable_key_file(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kind: str) -> None:
        path = tmp_path / "app.pem"
        if kind == "directory":
            path.mkdir()
        monkeypatch.setenv("TRACKER_GITHUB_APP_ID", str(APP_ID))
        monkeypatch.setenv("TRACKER_GITHUB_APP_PRIVATE_KEY_FILE", str(path))
        with pytest.raises(SettingsError) as caught:
            load_settings()
        message = str(caught.value)
        assert message.startswith(f"TRACKER_GITHUB_APP_PRIVATE_KEY_FILE ({path}) cannot be read (")
        assert "\n" not in message

    def test_a_key_file_that_is_not_an_rsa_key(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        ec_pem = (
            ec.generate_private_key(ec.SECP256R1())
            .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
            .decode()
        )
        (tmp_path / "app.pem").write_text(ec_pem)
        monkeypatch.setenv("TRACKER_GITHUB_APP_ID", str(APP_ID))
        monkeypatch.setenv("TRACKER_GITHUB_APP_PRIVATE_KEY_FILE", str(tmp_path / "app.pem"))
        with pytest.raises(SettingsError, match="is not an unencrypted RSA private key in PEM form") as caught:
            load_settings()
        assert all(line not in str(caught.value) for line in ec_pem.splitlines()[1:-1])

    @pytest.mark.parametrize(
        "text",
        [
            "-----BEGIN RSA PRIVATE KEY-----\nTOPSECRETKEYMATERIAL\n-----END RSA PRIVATE KEY-----",
            "TOPSECRETKEYMATERIAL",
            "-----BEGIN RSA PRIVATE KEY-----\nTOPSECRETKEYMATERIAL",  # cut short
        ],
        ids=["bad-base64", "not-pem", "truncated"],
    )
    def test_a_bad_pem_is_refused_without_quoting_it(
        self, monkeypatch: pytest.MonkeyPatch, text: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        monkeypatch.setenv("TRACKER_GITHUB_APP_ID", str(APP_ID))
        monkeypatch.setenv("TRACKER_GITHUB_APP_PRIVATE_KEY", text)
        with pytest.raises(SettingsError) as caught:
            load_settings()
        message = str(caught.value)
        assert message.startswith("TRACKER_GITHUB_APP_PRIVATE_KEY is not an unencrypted RSA private key in PEM form")
        assert "TOPSECRETKEYMATERIAL" not in message + repr(caught.value) + caplog.text
        assert "\n" not in message
        assert "TOPSECRETKEYMATERIAL" not in "".join(traceback.format_exception(caught.value))

    def test_a_key_and_a_key_file_are_one_too_many(
        self, monkeypatch: pytest.MonkeyPatch, pem: str, tmp_path: Path
    ) -> None:
        (tmp_path / "app.pem").write_text(pem)
        monkeypatch.setenv("TRACKER_GITHUB_APP_ID", str(APP_ID))
        monkeypatch.setenv("TRACKER_GITHUB_APP_PRIVATE_KEY", pem)
        monkeypatch.setenv("TRACKER_GITHUB_APP_PRIVATE_KEY_FILE", str(tmp_path / "app.pem"))
        with pytest.raises(SettingsError, match="keep one of them"):
            load_settings()
