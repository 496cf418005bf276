"""Authenticating as a GitHub App: a short-lived JWT, exchanged for installation access tokens.

GitHub's docs, "Generating a JSON Web Token (JWT) for a GitHub App": the JWT is signed with RS256;
`iat` is set 60 seconds in the past "to protect against clock drift"; `exp` must be "no more than
10 minutes into the future"; `iss` is the App's id. "Generating an installation access token for a
GitHub App": the installation id comes from the App's webhook payloads or from
`GET /repos/{owner}/{repo}/installation` (with the JWT), and `POST
/app/installations/{installation_id}/access_tokens` (with the JWT) answers 201 with `token` and
`expires_at`; the token expires after an hour.

Tokens are cached per installation until `TOKEN_MARGIN` before they expire: in this process, and in
Redis when a connection is given, so that every worker process uses the token one of them minted.
The key, the JWTs and the tokens never appear in an exception, a log line or a repr, and go to the
configured API's origin only (tracker.github.client refuses links and redirects elsewhere).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from redis import Redis, RedisError

from tracker.core.repository import check_full_name, repository_key
from tracker.github.client import BadAnswer, GitHubClient, GitHubError, RequestRefused

log = logging.getLogger(__name__)

JWT_BACKDATE = 60  # seconds: GitHub's advice against clock drift
# GitHub refuses an `exp` more than 10 minutes ahead; 9 leaves room for a clock running a little fast.
JWT_LIFETIME = 9 * 60
# A token is renewed this long before GitHub's `expires_at`, so no request (nor a job's last page)
# goes out with a token about to expire.
TOKEN_MARGIN = 5 * 60
# A repository found without the App is looked up again after this long (the App may get installed).
NOT_INSTALLED_RECHECK = 10 * 60
REDIS_KEY = "tracker:github:app-token:{}"


class AppNotInstalled(RequestRefused):
    """The App is not installed on the repository and no GITHUB_TOKEN is there to fall back to.

    Its `status` is 403, not the 404 of the lookup: callers read a 404 as "the PR or commit is gone"
    (tracker.github.fetch stores such a head as unavailable for good), and this is a setting to fix."""

    def __init__(self, full_name: str) -> None:
        GitHubError.__init__(self, f"the GitHub App is not installed on {full_name}: install it, or set GITHUB_TOKEN")
        self.status = 403
        self.full_name = full_name


@dataclass(frozen=True)
class InstallationToken:
    token: str = field(repr=False)
    expires_at: float  # epoch seconds

    def usable(self, now: float) -> bool:
        return now < self.expires_at - TOKEN_MARGIN


class GitHubApp:
    """One GitHub App: its JWTs, its installations' tokens. One per process (tracker.services)."""

    def __init__(
        self,
        app_id: int,
        private_key: str,
        base_url: str,
        *,
        redis: Redis | None = None,
        clock: Callable[[], float] = time.time,
        timeout: float = 10.0,
        attempts: int = 3,
    ) -> None:
        try:
            key = load_pem_private_key(private_key.encode("utf-8"), password=None)
        except (ValueError, TypeError):
            key = None  # the library's message is not passed on: it may quote the key
        if not isinstance(key, RSAPrivateKey):
            raise ValueError("the GitHub App's private key is not an unencrypted RSA private key in PEM form")
        self.app_id = app_id
        self._key = key
        self._redis = redis
        self._clock = clock
        # The App's own requests (lookups, token exchanges) authenticate with a fresh JWT each.
        self._client = GitHubClient(base_url, auth=self.jwt, timeout=timeout, attempts=attempts, write_interval=0.0)
        self._tokens: dict[int, InstallationToken] = {}
        self._installations: dict[str, tuple[int | None, float]] = {}  # repository key → (id, looked up at)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"GitHubApp(app_id={self.app_id}, base_url={self._client.base_url!r})"

    def close(self) -> None:
        self._client.close()

    def jwt(self) -> str:
        """A JWT that authenticates as the App for the next few minutes."""
        now = int(self._clock())
        claims = {"iat": now - JWT_BACKDATE, "exp": now + JWT_LIFETIME, "iss": str(self.app_id)}
        return jwt.encode(claims, self._key, algorithm="RS256")

    def token_for(self, full_name: str, installation_id: int | None = None, *, fallback: str | None = None) -> str:
        """A bearer token for requests about `full_name`: its installation's token when the App is
        installed there (`installation_id`, when known, spares the lookup), else `fallback` (the
        personal GITHUB_TOKEN); with neither, AppNotInstalled says what to do."""
        key = repository_key(check_full_name(full_name))
        for attempt in range(2):
            if installation_id is None:
                installation_id = self.installation_for(full_name)
            if installation_id is None:
                if fallback:
                    return fallback
                raise AppNotInstalled(full_name)
            try:
                return self.installation_token(installation_id)
            except RequestRefused as exc:
                if exc.status != 404 or attempt:
                    raise
                # The installation is gone (the App was uninstalled, or installed again under a new
                # id): ask GitHub which installation covers the repository now.
                with self._lock:
                    self._installations.pop(key, None)
                installation_id = None
        raise AssertionError("unreachable")

    def installation_for(self, full_name: str) -> int | None:
        """The App's installation on `full_name` (`GET /repos/{owner}/{repo}/installation`), or None
        when the App is not installed there. Remembered in this process."""
        key = repository_key(check_full_name(full_name))
        now = self._clock()
        with self._lock:
            known = self._installations.get(key)
        if known is not None and (known[0] is not None or now < known[1] + NOT_INSTALLED_RECHECK):
            return known[0]
        try:
            data = self._client.get(f"/repos/{check_full_name(full_name)}/installation").data
        except RequestRefused as exc:
            if exc.status != 404:
                raise
            found = None
        else:
            try:
                found = _installation_id(data)
            except ValueError as exc:
                raise BadAnswer(f"GitHub's answer for the App's installation on {full_name}: {exc}") from None
        with self._lock:
            self._installations[key] = (found, now)
        return found

    def installation_token(self, installation_id: int) -> str:
        """The installation's access token: cached here, else shared through Redis, else minted."""
        installation_id = _installation_id({"id": installation_id})
        with self._lock:
            now = self._clock()
            cached = self._tokens.get(installation_id)
            if cached is not None and cached.usable(now):
                return cached.token
            shared = self._shared(installation_id, now)
            if shared is None:
                shared = self._mint(installation_id)
                self._share(installation_id, shared, self._clock())
            self._tokens[installation_id] = shared
            return shared.token

    def _mint(self, installation_id: int) -> InstallationToken:
        page = self._client.post(f"/app/installations/{installation_id}/access_tokens", {})
        data: Any = page.data
        token = data.get("token") if isinstance(data, dict) else None
        expires_at = data.get("expires_at") if isinstance(data, dict) else None
        try:
            expires = datetime.fromisoformat(str(expires_at)).timestamp()
        except ValueError:
            expires = None
        if not isinstance(token, str) or not token or expires is None:
            raise BadAnswer(f"GitHub's answer for installation {installation_id} had no token or expiry")
        log.info("minted a token for GitHub App installation %s, valid until %s", installation_id, expires_at)
        return InstallationToken(token, expires)

    def _shared(self, installation_id: int, now: float) -> InstallationToken | None:
        if self._redis is None:
            return None
        try:
            value = self._redis.get(REDIS_KEY.format(installation_id))
        except RedisError as exc:  # Redis is a shortcut here, not a need: mint instead
            log.warning("could not read a shared installation token from Redis (%s)", type(exc).__name__)
            return None
        if value is None:
            return None
        try:
            document = json.loads(value)
            shared = InstallationToken(str(document["token"]), float(document["expires_at"]))
        except (ValueError, KeyError, TypeError):
            return None
        return shared if shared.usable(now) else None

    def _share(self, installation_id: int, token: InstallationToken, now: float) -> None:
        if self._redis is None:
            return
        useful = int(token.expires_at - TOKEN_MARGIN - now)
        if useful <= 0:
            return
        document = json.dumps({"token": token.token, "expires_at": token.expires_at})
        try:
            self._redis.set(REDIS_KEY.format(installation_id), document, ex=useful)
        except RedisError as exc:
            log.warning("could not share an installation token through Redis (%s)", type(exc).__name__)


def _installation_id(data: Any) -> int:
    value = data.get("id") if isinstance(data, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"not a GitHub App installation id: {value!r}")
    return value
