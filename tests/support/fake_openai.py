"""A local stand-in for an OpenAI-compatible chat completions endpoint (`POST /v1/chat/completions`).

A real HTTP server on 127.0.0.1 and a free port, started and stopped per test (`with FakeOpenAI() as
fake:`). It answers from a script, in order, one scripted answer per request:

- `Reply(content)`: a `chat.completion` object in the shape of OpenAI's API reference (id, object,
  created, model, choices[0].message with role, content and refusal, finish_reason, usage with
  prompt, completion and total tokens). `content=None`, `finish_reason="length"` and `refusal=...`
  make the broken answers a client must refuse.
- `Status(status, headers, body)`: a raw answer, such as a 429 with `Retry-After: 1` or a 500. A
  str or bytes body is sent as it is (a gateway's HTML page), anything else as JSON; without one,
  an error object in OpenAI's shape.
- `Slow(seconds, then)`: waits, then answers `then` (a `Reply` unless given): longer than the
  client's timeout, it is a timeout. Closing the server cuts the wait short.

With `api_key` set, a request without `Authorization: Bearer <api_key>` gets OpenAI's 401 (its
message quoting part of the key, as OpenAI's does), before the script is read. A request on another
path gets a 404, and a request with no script left a 500 saying so. Every request is kept in
`requests` (path, headers, parsed JSON body), scripted failures included.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class Reply:
    content: str | None
    finish_reason: str = "stop"
    prompt_tokens: int = 120
    completion_tokens: int = 30
    model: str | None = None  # the model the answer names; the requested one when None
    refusal: str | None = None


@dataclass(frozen=True)
class Status:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None


@dataclass(frozen=True)
class Slow:
    seconds: float
    then: Reply | Status = Reply('{"slow": true}')


Answer = Reply | Status | Slow


@dataclass(frozen=True)
class Recorded:
    path: str
    headers: dict[str, str]  # names in lower case
    body: Any  # the parsed JSON body, or None


def completion_object(reply: Reply, requested_model: str) -> dict[str, Any]:
    """A chat completion as OpenAI's API reference shows one (the `usage` details left out: vLLM and
    Ollama send none)."""
    return {
        "id": f"chatcmpl-fake{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model or requested_model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.content, "refusal": reply.refusal},
                "logprobs": None,
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
        "system_fingerprint": "fp_fake",
    }


def error_object(message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    """An error body in OpenAI's shape."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass


class FakeOpenAI:
    def __init__(self, api_key: str | None = None) -> None:
        self.api_key = api_key
        self.requests: list[Recorded] = []
        self._script: list[Answer] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server = make_server("127.0.0.1", 0, self._app, threaded=True, request_handler=_QuietHandler)
        self.url = f"http://127.0.0.1:{self._server.server_port}/v1"  # what a client takes as base URL
        # A short poll interval: `shutdown` waits for the next poll, and a server per test adds it up.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> FakeOpenAI:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def script(self, *answers: Answer) -> None:
        """Answer the next requests with these, in order."""
        with self._lock:
            self._script.extend(answers)

    @property
    def bodies(self) -> list[Any]:
        return [request.body for request in self.requests]

    def _app(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        request = Request(environ)
        response = self._answer(request)
        return response(environ, start_response)

    def _answer(self, request: Request) -> Response:
        body = request.get_json(silent=True)
        with self._lock:
            self.requests.append(Recorded(request.path, {k.lower(): v for k, v in request.headers.items()}, body))
        if self.api_key is not None and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            # OpenAI's wording, which quotes the start and the end of the key it was given.
            given = request.headers.get("Authorization", "").removeprefix("Bearer ")
            message = (
                f"Incorrect API key provided: {given[:3]}***{given[-4:]}. You can find your API key at "
                "https://platform.openai.com/account/api-keys."
            )
            return _json(error_object(message, "invalid_request_error", "invalid_api_key"), 401)
        if request.method != "POST" or request.path != PATH:
            unknown = f"Unknown request URL: {request.method} {request.path}"
            return _json(error_object(unknown, "invalid_request_error"), 404)
        with self._lock:
            answer = self._script.pop(0) if self._script else None
        if answer is None:
            return _json(error_object("fake_openai: no answer scripted for this request", "server_error"), 500)
        if isinstance(answer, Slow):
            self._closing.wait(answer.seconds)
            answer = answer.then
        if isinstance(answer, Status):
            if isinstance(answer.body, str | bytes):
                return Response(answer.body, answer.status, headers=answer.headers, content_type="text/html")
            content = answer.body if answer.body is not None else error_object("scripted", "server_error")
            return _json(content, answer.status, answer.headers)
        model = body.get("model", "") if isinstance(body, dict) else ""
        return _json(completion_object(answer, str(model)), 200)


def _json(body: Any, status: int, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body), status, headers=headers or {}, content_type="application/json")
