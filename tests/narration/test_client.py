"""The chat completions client against a local fake OpenAI-compatible server (tests/support/fake_openai.py).

Waits go through an injected sleep that only records them, so retries cost no time; the timeout
test alone waits for real (0.2 s)."""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from tests.support.fake_openai import PATH, FakeOpenAI, Reply, Slow, Status, error_object
from tracker.narration.client import ChatClient, Completion, LlmError

KEY = "sk-proj-test-7Hq2Zr9LmXw4"
MODEL = "gpt-4o-mini"
# Untrusted repository text, as the narrator will send it: it must never reach an error message.
PROMPT = "Change group G1, PR #4521 'Fix flaky NCCL test' (untrusted text)"
MESSAGES = [
    {"role": "system", "content": "You write theme titles for a monthly report. Answer in JSON."},
    {"role": "user", "content": PROMPT},
]
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"title": {"type": "string"}},
    "required": ["title"],
    "additionalProperties": False,
}
ANSWER = '{"title": "Faster distributed checkpoints"}'


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(api_key=KEY) as server:
        yield server


@pytest.fixture
def sleeps() -> list[float]:
    return []


def client_for(fake: FakeOpenAI, sleeps: list[float], **options: Any) -> ChatClient:
    options.setdefault("timeout", 5.0)
    return ChatClient(fake.url, options.pop("api_key", KEY), MODEL, sleep=sleeps.append, **options)


def ask(client: ChatClient) -> Completion:
    return client.complete_json(MESSAGES, SCHEMA, "theme_titles")


def failure(client: ChatClient) -> LlmError:
    with pytest.raises(LlmError) as caught:
        ask(client)
    return caught.value


# --- answers --------------------------------------------------------------------------------------


def test_a_valid_answer_comes_back_with_its_model_and_token_counts(fake: FakeOpenAI, sleeps: list[float]) -> None:
    fake.script(Reply(ANSWER, prompt_tokens=321, completion_tokens=12, model="gpt-4o-mini-2024-07-18"))
    with client_for(fake, sleeps) as client:
        completion = ask(client)
    assert completion == Completion(
        text=ANSWER, model="gpt-4o-mini-2024-07-18", prompt_tokens=321, completion_tokens=12, finish_reason="stop"
    )
    assert len(fake.requests) == 1
    assert sleeps == []


def test_the_temperature_is_sent_as_configured_or_left_out(fake: FakeOpenAI, sleeps: list[float]) -> None:
    for temperature in (0.3, None):
        fake.script(Reply(ANSWER))
        with client_for(fake, sleeps, temperature=temperature) as client:
            ask(client)
    configured, left_out = (request.body for request in fake.requests)
    assert configured["temperature"] == 0.3
    assert "temperature" not in left_out  # the model's default: some models refuse any other


def test_the_request_asks_for_strict_json_schema_output_at_temperature_0(fake: FakeOpenAI, sleeps: list[float]) -> None:
    fake.script(Reply(ANSWER))
    with ChatClient(fake.url + "/", KEY, MODEL, sleep=sleeps.append) as client:  # a trailing slash is fine
        ask(client)
    (request,) = fake.requests
    assert request.path == PATH
    assert request.body == {
        "model": MODEL,
        "messages": MESSAGES,
        "temperature": 0,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "theme_titles", "strict": True, "schema": SCHEMA},
        },
    }
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["user-agent"].startswith("monthly-activity-tracker/")


@pytest.mark.parametrize("api_key", [None, "", "  \n"])
def test_without_a_key_no_authorization_header_is_sent(api_key: str | None, sleeps: list[float]) -> None:
    # A local vLLM or Ollama server needs no key.
    with FakeOpenAI() as fake, client_for(fake, sleeps, api_key=api_key) as client:
        fake.script(Reply(ANSWER))
        assert ask(client).text == ANSWER
        assert "authorization" not in fake.requests[0].headers


def test_a_key_pasted_with_a_newline_is_trimmed(fake: FakeOpenAI, sleeps: list[float]) -> None:
    fake.script(Reply(ANSWER))
    with client_for(fake, sleeps, api_key=KEY + "\n") as client:
        assert ask(client).text == ANSWER


def test_a_base_url_without_a_scheme_is_refused_without_quoting_it() -> None:
    with pytest.raises(ValueError, match="TRACKER_LLM_BASE_URL must start with http") as caught:
        ChatClient("user:hunter2@gateway.example/v1", KEY, MODEL)
    assert "hunter2" not in str(caught.value)


# --- rate limits ------------------------------------------------------------------------------------


def test_a_429_is_retried_after_its_retry_after(fake: FakeOpenAI, sleeps: list[float]) -> None:
    limited = error_object("Rate limit reached for requests", "requests", "rate_limit_exceeded")
    fake.script(Status(429, {"Retry-After": "1"}, limited), Reply(ANSWER))
    with client_for(fake, sleeps) as client:
        assert ask(client).text == ANSWER
    assert sleeps == [1.0]
    assert len(fake.requests) == 2
    assert fake.bodies[0] == fake.bodies[1]


@pytest.mark.parametrize(
    ("headers", "waited"),
    [
        ({"Retry-After": "2.5"}, 2.5),
        ({"Retry-After": "3600"}, 60.0),  # capped: a worker is not held for an hour
        ({"Retry-After": "1", "retry-after-ms": "1500"}, 1.5),  # OpenAI's and Azure's finer header wins
        ({"Retry-After": "soon"}, 0.5),  # unreadable: the usual backoff
        ({}, 0.5),
    ],
)
def test_the_wait_after_a_429(fake: FakeOpenAI, sleeps: list[float], headers: dict[str, str], waited: float) -> None:
    fake.script(Status(429, headers), Reply(ANSWER))
    with client_for(fake, sleeps) as client:
        ask(client)
    assert sleeps == [waited]


def test_a_retry_after_given_as_an_http_date(fake: FakeOpenAI, sleeps: list[float]) -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    fake.script(Status(429, {"Retry-After": when}), Reply(ANSWER))
    with client_for(fake, sleeps) as client:
        ask(client)
    assert len(sleeps) == 1 and 25 < sleeps[0] <= 30


def test_a_429_that_lasts_is_rate_limited_after_max_retries(fake: FakeOpenAI, sleeps: list[float]) -> None:
    fake.script(*[Status(429, {"Retry-After": "7"})] * 5)
    with client_for(fake, sleeps) as client:
        error = failure(client)
    assert error.kind == "rate_limited"
    assert (error.status, error.retry_after) == (429, 7.0)  # when a job may come back
    assert len(fake.requests) == 3  # the first try and max_retries=2
    assert sleeps == [7.0, 7.0]


def test_max_retries_is_the_number_of_retries(fake: FakeOpenAI, sleeps: list[float]) -> None:
    fake.script(*[Status(429, {"Retry-After": "1"})] * 5)
    with client_for(fake, sleeps, max_retries=0) as client:
        assert failure(client).kind == "rate_limited"
    assert len(fake.requests) == 1
    assert sleeps == []


def test_an_exhausted_quota_is_not_retried(fake: FakeOpenAI, sleeps: list[float]) -> None:
    message = "You exceeded your current quota, please check your plan and billing details."
    fake.script(Status(429, {}, error_object(message, "insufficient_quota", "insufficient_quota")))
    with client_for(fake, sleeps) as client:
        error = failure(client)
    assert (error.kind, error.code) == ("rate_limited", "insufficient_quota")
    assert "quota" in str(error)
    assert len(fake.requests) == 1
    assert sleeps == []


# --- server errors, connections, timeouts ---------------------------------------------------------


def test_a_500_is_retried_after_a_short_backoff(fake: FakeOpenAI, sleeps: list[float]) -> None:
    fake.script(Status(500), Reply(ANSWER))
    with client_for(fake, sleeps) as client:
        assert ask(client).text == ANSWER
    assert sleeps == [0.5]
    assert len(fake.requests) == 2


def test_5xx_that_lasts_is_an_http_error_after_max_retries(fake: FakeOpenAI, sleeps: list[float]) -> None:
    fake.script(Status(502, {}, "<html>Bad Gateway</html>"), Status(503), Status(503), Reply(ANSWER))
    with client_for(fake, sleeps) as client:
        error = failure(client)
    assert (error.kind, error.status) == ("http", 503)
    assert len(fake.requests) == 3
    assert sleeps == [0.5, 1.0]


def test_an_endpoint_that_cannot_be_reached_is_a_connection_error(sleeps: list[float]) -> None:
    attempts: list[httpx.Request] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        attempts.append(request)
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    transport = httpx.MockTransport(refuse)
    with ChatClient("http://127.0.0.1:9/v1", KEY, MODEL, transport=transport, sleep=sleeps.append) as client:
        error = failure(client)
    assert error.kind == "connection"
    assert "http://127.0.0.1:9" in str(error) and "TRACKER_LLM_BASE_URL" in str(error)
    assert len(attempts) == 3
    assert sleeps == [0.5, 1.0]


def test_a_connection_error_then_an_answer(fake: FakeOpenAI, sleeps: list[float]) -> None:
    calls: list[int] = []
    with httpx.HTTPTransport() as real:

        def flaky(request: httpx.Request) -> httpx.Response:
            calls.append(1)
            if len(calls) == 1:
                raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
            return real.handle_request(request)

        fake.script(Reply(ANSWER))
        with client_for(fake, sleeps, transport=httpx.MockTransport(flaky)) as client:
            assert ask(client).text == ANSWER
    assert sleeps == [0.5]


def test_a_timeout_raises_at_once(fake: FakeOpenAI, sleeps: list[float]) -> None:
    fake.script(Slow(1.0), Reply(ANSWER))
    with client_for(fake, sleeps, timeout=0.2) as client:
        error = failure(client)
    assert error.kind == "timeout"  # not the answer, which came after a second
    assert "within 0.2 s" in str(error)
    assert len(fake.requests) == 1  # not retried
    assert sleeps == []


# --- refusals ---------------------------------------------------------------------------------------


def test_a_wrong_key_is_an_http_error_without_retry(fake: FakeOpenAI, sleeps: list[float]) -> None:
    wrong = "sk-proj-wrong-Q8vN3kPd5Yt1"
    with client_for(fake, sleeps, api_key=wrong) as client:
        error = failure(client)
    assert (error.kind, error.status, error.code) == ("http", 401, "invalid_api_key")
    assert "TRACKER_LLM_API_KEY" in str(error)
    # OpenAI's own message quotes the key's first and last characters: it is not passed on.
    assert "Yt1" not in str(error) and "Incorrect API key" not in str(error)
    assert len(fake.requests) == 1
    assert sleeps == []


@pytest.mark.parametrize(("status", "advice"), [(400, "json_schema"), (403, "TRACKER_LLM_MODEL"), (404, "/v1")])
def test_other_refusals_are_not_retried(fake: FakeOpenAI, sleeps: list[float], status: int, advice: str) -> None:
    fake.script(Status(status), Reply(ANSWER))
    with client_for(fake, sleeps) as client:
        error = failure(client)
    assert (error.kind, error.status) == ("http", status)
    assert advice in str(error)
    assert len(fake.requests) == 1
    assert sleeps == []


# --- answers that are not usable ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (Reply(None), "no choices[0].message.content"),
        (Reply(""), "no choices[0].message.content"),
        (Reply('{"title": "Faster dist', finish_reason="length"), "token limit"),
        (Reply(None, refusal="I'm sorry, I cannot assist with that request."), "refused"),
        (Reply(ANSWER, finish_reason="content_filter"), "content filter"),
        (Status(200, {}, {"choices": []}), "no choices"),
        (Status(200, {}, {"object": "error", "message": "model not loaded"}), "no choices"),
        (Status(200, {}, "<html>Sign in to the gateway</html>"), "not JSON"),
    ],
)
def test_an_unusable_answer_is_an_invalid_response(
    fake: FakeOpenAI, sleeps: list[float], answer: Reply | Status, says: str
) -> None:
    fake.script(answer, Reply(ANSWER))
    with client_for(fake, sleeps) as client:
        error = failure(client)
    assert error.kind == "invalid_response"
    assert says in str(error)
    assert len(fake.requests) == 1  # the caller decides whether to ask again, with a targeted prompt


def test_missing_usage_counts_as_zero_tokens(fake: FakeOpenAI, sleeps: list[float]) -> None:
    body = {"model": MODEL, "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER}}]}
    fake.script(Status(200, {}, body))
    with client_for(fake, sleeps) as client:
        completion = ask(client)
    assert (completion.prompt_tokens, completion.completion_tokens, completion.finish_reason) == (0, 0, "")


# --- secrets ------------------------------------------------------------------------------------------


def test_no_error_or_repr_holds_the_key_or_the_request(fake: FakeOpenAI, sleeps: list[float]) -> None:
    # vLLM and other FastAPI servers answer a malformed request with the request echoed back.
    echo = {"object": "error", "message": f"invalid input: {MESSAGES} {KEY}", "type": "BadRequestError", "code": 400}
    scripts: list[list[Reply | Status | Slow]] = [
        [Status(400, {}, echo)],
        [Status(500, {}, echo)] * 3,
        [Status(429, {"Retry-After": "1"}, echo)] * 3,
        [Status(200, {}, echo)],
        [Reply(None, refusal=f"I will not repeat {PROMPT}")],
        [Reply(PROMPT, finish_reason="length")],
        [Slow(1.0)],
    ]
    errors: list[LlmError] = []
    for script in scripts:
        fake.script(*script)
        with client_for(fake, sleeps, timeout=0.2) as client:
            errors.append(failure(client))
            assert KEY not in repr(client)
    assert [e.kind for e in errors] == [
        "http",
        "http",
        "rate_limited",
        "invalid_response",
        "invalid_response",
        "invalid_response",
        "timeout",
    ]
    for error in errors:
        shown = "".join(traceback.format_exception(error)) + repr(error) + error.detail
        for secret in (KEY, KEY[-6:], PROMPT, "4521", "untrusted"):
            assert secret not in shown, (error.kind, secret)
