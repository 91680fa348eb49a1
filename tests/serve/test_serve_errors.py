"""Bad requests get a 4xx with an OpenAI-style error body (never a 5xx), and the server keeps serving;
the API key guards every route but /health. Raw HTTP (httpx) so that malformed bodies can be sent."""
from __future__ import annotations

import json

import httpx
import openai
import pytest
from serve_support import client, tiny_served, running_server, single_thread  # noqa: F401


@pytest.fixture(scope="module")
def url():
    with running_server(max_request_bytes=64 * 1024) as base:
        yield base


def post(url: str, path: str, body, **headers) -> httpx.Response:
    content = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return httpx.post(f"{url}{path}", content=content, headers={"content-type": "application/json", **headers})


def assert_openai_error(response: httpx.Response, status: int, *, param: str | None = None,
                        code: str | None = None, says: str = "") -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and says in error["message"]
    if param is not None:
        assert error["param"] == param
    if code is not None:
        assert error["code"] == code


LONG = "x" * 3000  # the tiny model's context is 2044 tokens (one byte = one token)


@pytest.mark.parametrize("path, body, param, says", [
    ("/v1/completions", {"prompt": "hi", "max_tokens": -5}, "max_tokens", "greater than or equal to 1"),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 0}, "max_tokens", "greater than or equal to 1"),
    ("/v1/completions", {"prompt": "hi", "max_tokens": "ten"}, "max_tokens", "valid integer"),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 2.5}, "max_tokens", "valid integer"),
    ("/v1/completions", {"prompt": "hi", "temperature": "hot"}, "temperature", "valid number"),
    ("/v1/completions", {"prompt": "hi", "temperature": 9}, "temperature", "less than or equal to 2"),
    ("/v1/completions", {"prompt": "hi", "top_p": 0}, "top_p", "greater than 0"),
    ("/v1/completions", {"prompt": "hi", "seed": -1}, "seed", "greater than or equal to 0"),
    ("/v1/completions", {"prompt": "hi", "stream": "yes"}, "stream", "valid boolean"),
    ("/v1/completions", {"prompt": "hi", "stop": 5}, "stop", "string or a list of strings"),
    ("/v1/completions", {"prompt": "hi", "stop": [""]}, "stop", "must not be empty"),
    ("/v1/completions", {"prompt": ""}, "prompt", "empty"),
    ("/v1/completions", {"prompt": []}, "prompt", "empty"),
    ("/v1/completions", {"prompt": {"text": "hi"}}, "prompt", "string or a list of token ids"),
    ("/v1/completions", {"prompt": ["a", "b"]}, "prompt", "one request per prompt"),
    ("/v1/completions", {"max_tokens": 4}, "prompt", "required"),
    ("/v1/completions", {"prompt": [1, 99999]}, "prompt", "outside the vocabulary"),
    ("/v1/completions", {"prompt": "hi", "n": 2}, None, "n > 1"),
    ("/v1/completions", {"prompt": "hi", "logprobs": 1}, None, "logprobs"),
    ("/v1/chat/completions", {"messages": []}, "messages", "at least 1 item"),
    ("/v1/chat/completions", {"messages": "hi"}, "messages", "valid list"),
    ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role", "'user'"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
     "messages[0].content", "text content parts"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": ""}]}, "messages", "empty"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": -1},
     "max_completion_tokens", "greater than or equal to 1"),
])
@pytest.mark.slow
def test_invalid_fields_are_400_naming_the_field(url, path, body, param, says):
    assert_openai_error(post(url, path, body), 400, param=param, says=says)


@pytest.mark.parametrize("body, says", [
    (b"{", "malformed JSON"),
    (b'{"prompt": "hi",}', "malformed JSON"),
    (b"", "body is empty"),
    (b"[1, 2]", "must be a JSON object"),
    (b'"hi"', "must be a JSON object"),
    (b'{"prompt": "hi", "temperature": NaN}', "NaN is not valid JSON"),
    (b"\xff\xfe{}", "malformed JSON"),
    (b"[" * 50_000, "malformed JSON"),
])
def test_malformed_bodies_are_400(url, body, says):
    assert_openai_error(post(url, "/v1/completions", body), 400, code="invalid_json", says=says)


def test_huge_max_tokens_and_long_prompts_are_context_errors(url):
    huge = post(url, "/v1/completions", {"prompt": "hi", "max_tokens": 10**30})
    assert_openai_error(huge, 400, param="max_tokens", code="context_length_exceeded", says="at most 2042")
    over = post(url, "/v1/completions", {"prompt": LONG, "max_tokens": 1})
    assert_openai_error(over, 400, param="prompt", code="context_length_exceeded", says="the prompt has 3000")
    chat = post(url, "/v1/chat/completions", {"messages": [{"role": "user", "content": LONG}]})
    assert_openai_error(chat, 400, param="messages", code="context_length_exceeded")


def test_unknown_model_is_404_model_not_found(url):
    assert_openai_error(post(url, "/v1/completions", {"model": "gpt-9", "prompt": "hi"}), 404, param="model",
                        code="model_not_found", says=tiny_served().name)
    with pytest.raises(openai.NotFoundError):
        client(url).chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "hi"}])


def test_unknown_routes_methods_and_oversized_bodies_are_openai_shaped(url):
    assert_openai_error(httpx.get(f"{url}/v1/nothing"), 404, says="no route /v1/nothing")
    assert_openai_error(httpx.get(f"{url}/v1/completions"), 405, says="GET is not allowed")
    big = post(url, "/v1/completions", {"prompt": "x" * 70_000})
    assert_openai_error(big, 413, code="body_too_large")


def test_the_server_still_answers_after_every_kind_of_bad_request(url):
    response = client(url).completions.create(model=tiny_served().name, prompt="Hello", max_tokens=4,
                                              temperature=0)
    assert response.usage.completion_tokens == 4
    assert httpx.get(f"{url}/health").json()["status"] == "ok"


@pytest.mark.slow
def test_api_key_is_required_on_every_route_but_health():
    with running_server(api_key="s3cret") as url:
        for method, path in [("GET", "/v1/models"), ("GET", "/metrics"), ("POST", "/v1/completions"),
                             ("POST", "/v1/chat/completions")]:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
                response = httpx.request(method, f"{url}{path}", headers=headers, json={"prompt": "hi"})
                assert_openai_error(response, 401, code="invalid_api_key", says="Authorization: Bearer")
                assert response.headers["www-authenticate"] == "Bearer"
        assert httpx.get(f"{url}/health").status_code == 200
        assert httpx.get(f"{url}/metrics", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        with pytest.raises(openai.AuthenticationError):
            client(url, api_key="wrong").models.list()
        answer = client(url, api_key="s3cret").completions.create(model=tiny_served().name, prompt="Hi",
                                                                 max_tokens=3, temperature=0)
        assert answer.usage.completion_tokens == 3
