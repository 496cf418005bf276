"""A small client for an OpenAI-compatible chat completions endpoint (OpenAI, vLLM, Ollama, gateways).

One call, `ChatClient.complete_json`: the messages go out with `temperature: 0` (or the one configured,
or none for models that take only their default) and a strict JSON schema as `response_format`
(OpenAI's "Structured Outputs"; vLLM and Ollama accept the same field), and the model's text comes
back with its token counts. The text is not parsed here: the caller
validates it, and may want it whole for a targeted retry.

`base_url` is what the `openai` package calls its base URL, the part before `/chat/completions`:
`https://api.openai.com/v1`, `http://localhost:8000/v1` (vLLM), `http://localhost:11434/v1` (Ollama).

Waiting: a 429 is retried after its `Retry-After` (capped, so that a worker is never held for
long; past the retries, `LlmError.retry_after` tells the job when to come back). 5xx answers and
refused or reset connections are retried after a short backoff. A timeout is not retried: the
endpoint had the whole `timeout` to answer and a second try would likely be billed and slow too.
Other 4xx answers (a wrong key, model or URL) are not retried: waiting will not fix them.

Every failure is one exception, `LlmError`, whose text never holds the API key or the request body:
the prompt is repository text and the key is a secret, and these messages end up in logs and in
the status page. So the server's own error text is left out too (an OpenAI 401 quotes part of the
key; a vLLM 400 may echo the request): the message keeps the status and the error's `code` or
`type`, which are short identifiers.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal

import httpx

from tracker import __version__
from tracker.tls import tls_context

LlmErrorKind = Literal["timeout", "rate_limited", "http", "connection", "invalid_response"]

# The longest a 429's Retry-After is waited for in place; a longer wait is cut to this.
MAX_RETRY_AFTER = 60.0
# Backoff for 5xx answers, connection errors and a 429 without Retry-After: 0.5 s, 1 s, 2 s, ... 8 s.
BACKOFF_BASE = 0.5
BACKOFF_MAX = 8.0
# Error codes and types from the answer are quoted only when they look like identifiers.
_IDENTIFIER = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


class LlmError(Exception):
    """The endpoint failed to give usable text. `kind` says how:

    - `timeout`: no answer within the client's timeout (not retried);
    - `rate_limited`: 429 after the retries, or at once for an exhausted quota; `retry_after` is the
      wait the last answer asked for, in seconds, when it said;
    - `http`: any other 4xx, or a 5xx after the retries;
    - `connection`: the endpoint could not be reached, after the retries;
    - `invalid_response`: an answer that is not a chat completion with text, or one cut short.

    `status` is the HTTP status of the last answer and `code` its OpenAI-style error code (or type),
    when there was one.
    """

    def __init__(
        self,
        kind: LlmErrorKind,
        detail: str,
        *,
        status: int | None = None,
        code: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail
        self.status = status
        self.code = code
        self.retry_after = retry_after


@dataclass(frozen=True)
class Completion:
    """The model's text and what it cost. `model` is the model that answered, as the endpoint names it
    (OpenAI answers with a dated snapshot, `gpt-4o-2024-08-06`, for `gpt-4o`). Token counts are 0 when
    the endpoint sends no `usage`."""

    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str


class ChatClient:
    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        *,
        timeout: float = 60.0,
        temperature: float | None = 0.0,
        max_retries: int = 2,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            # The URL itself is not quoted: it may carry a password.
            raise ValueError(
                "TRACKER_LLM_BASE_URL must start with http:// or https:// (e.g. https://api.openai.com/v1)"
            )
        headers = {"User-Agent": f"monthly-activity-tracker/{__version__}"}
        # A key pasted into a .env file often carries a trailing newline; a local server needs none.
        key = (api_key or "").strip()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._where = _where(httpx.URL(self._url))
        self.model = model
        self.temperature = temperature
        self._max_retries = max(0, max_retries)
        self._sleep = sleep
        self._http = httpx.Client(headers=headers, timeout=timeout, transport=transport, verify=tls_context())
        self._timeout = timeout
        # HTTP requests sent, each retry included: an endpoint may bill (or count against a quota) every one.
        self.requests = 0

    def __repr__(self) -> str:
        return f"ChatClient(model={self.model!r}, endpoint={self._where!r})"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def complete_json(self, messages: list[dict[str, str]], schema: dict[str, Any], schema_name: str) -> Completion:
        """The model's answer to `messages`, constrained to `schema` (a JSON Schema object that meets
        OpenAI's strict-mode rules: every property required, `additionalProperties: false`)."""
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "strict": True, "schema": schema},
            },
        }
        if self.temperature is not None:  # None: the model's default (some models accept no other)
            payload["temperature"] = self.temperature
        return _completion(self._post(payload), self.model)

    def _post(self, payload: dict[str, Any]) -> httpx.Response:
        """POST with the retries described in the module docstring: a 2xx answer, or an LlmError."""
        attempt = 0
        while True:
            try:
                return self._send(payload)
            except LlmError as error:
                wait = self._wait(error, attempt)
                if wait is None:
                    raise
            self._sleep(wait)
            attempt += 1

    def _wait(self, error: LlmError, attempt: int) -> float | None:
        """How long to wait before retrying after `error`, or None to give up."""
        if attempt >= self._max_retries:
            return None
        if error.kind == "rate_limited" and error.code != "insufficient_quota":
            return _backoff(attempt) if error.retry_after is None else min(error.retry_after, MAX_RETRY_AFTER)
        if error.kind == "connection" or (error.kind == "http" and (error.status or 0) >= 500):
            return _backoff(attempt)
        return None

    def _send(self, payload: dict[str, Any]) -> httpx.Response:
        where = self._where
        self.requests += 1
        try:
            response = self._http.post(self._url, json=payload)
        # httpx's own messages are left out (`from None`): a malformed header, for one, is quoted whole.
        except httpx.TimeoutException as exc:
            detail = f"{where} did not answer within {self._timeout:g} s ({type(exc).__name__})"
            raise LlmError("timeout", detail) from None
        except httpx.TransportError as exc:
            name = type(exc).__name__
            detail = f"could not reach {where} ({name}): check TRACKER_LLM_BASE_URL and that the server runs"
            raise LlmError("connection", detail) from None
        status = response.status_code
        if status < 300:
            return response
        code = _error_code(response)
        named = f" ({code})" if code else ""
        if status == 429 and code == "insufficient_quota":
            # OpenAI: "You exceeded your current quota, please check your plan and billing details".
            detail = f"{where} answered 429{named}: the account's quota is used up; check its plan and billing"
            raise LlmError("rate_limited", detail, status=status, code=code)
        if status == 429:
            detail = f"{where} answered 429{named}: too many requests, still limited after {self._max_retries} retries"
            raise LlmError("rate_limited", detail, status=status, code=code, retry_after=_retry_after(response.headers))
        if status >= 500:
            detail = f"{where} answered {status}{named}, still failing after {self._max_retries} retries"
            raise LlmError("http", detail, status=status, code=code)
        raise LlmError("http", f"{where} answered {status}{named}: {_advice(status)}", status=status, code=code)


def _completion(response: httpx.Response, requested: str) -> Completion:
    try:
        body = response.json()
    except ValueError:
        raise LlmError("invalid_response", "the answer is not JSON: is TRACKER_LLM_BASE_URL the API's URL?") from None
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise LlmError("invalid_response", "the answer has no choices: is this an OpenAI-compatible endpoint?")
    choice = choices[0]
    message = choice.get("message")
    message = message if isinstance(message, dict) else {}
    finish_reason = choice.get("finish_reason")
    finish_reason = finish_reason if isinstance(finish_reason, str) else ""
    if message.get("refusal"):
        # The refusal's own text is not quoted: it may repeat the prompt.
        raise LlmError("invalid_response", "the model refused to answer (message.refusal)")
    if finish_reason == "length":
        raise LlmError("invalid_response", "the answer was cut at the token limit (finish_reason length)")
    if finish_reason == "content_filter":
        raise LlmError("invalid_response", "the answer was withheld by the endpoint's content filter")
    text = message.get("content")
    if not isinstance(text, str) or not text:
        raise LlmError("invalid_response", "the answer has no choices[0].message.content")
    usage = body.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    model = body.get("model")
    return Completion(
        text=text,
        model=model if isinstance(model, str) and model else requested,
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        finish_reason=finish_reason,
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _backoff(attempt: int) -> float:
    return float(min(BACKOFF_BASE * 2**attempt, BACKOFF_MAX))


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait, from `retry-after-ms` (sent by OpenAI and Azure, and read first by the `openai`
    package) or `Retry-After`, which is seconds or an HTTP date (RFC 9110, section 10.2.3)."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:  # an HTTP date is always GMT
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, (moment - datetime.now(UTC)).total_seconds())


def _error_code(response: httpx.Response) -> str | None:
    """The `code` (or else `type`) of an OpenAI-style error body, if it is an identifier."""
    try:
        body = response.json()
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None
    for name in ("code", "type"):
        value = error.get(name)
        if isinstance(value, str) and _IDENTIFIER.fullmatch(value):
            return value
    return None


def _advice(status: int) -> str:
    if status == 401:
        return "the endpoint refused the API key; check TRACKER_LLM_API_KEY"
    if status == 403:
        return "the API key may not use this model or endpoint; check TRACKER_LLM_API_KEY and TRACKER_LLM_MODEL"
    if status == 404:
        return (
            "no such model or URL; check TRACKER_LLM_MODEL, and that TRACKER_LLM_BASE_URL ends before "
            "/chat/completions (for example https://api.openai.com/v1)"
        )
    if status == 400:
        return "the endpoint refused the request; it may not support a strict json_schema response_format"
    return "the endpoint refused the request"


def _where(url: httpx.URL) -> str:
    """The endpoint as shown in messages: scheme, host and port only (a URL may carry a password or a
    key in its query)."""
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{url.host}{port}"
