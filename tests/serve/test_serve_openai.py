"""The real server through the official `openai` client: completions, chat, streaming, stop strings, usage and
per-request speculative stats, and lossless output (greedy text equals the target's own greedy decoding)."""
from __future__ import annotations

import pytest
from serve_support import client, tiny_served, running_server, single_thread  # noqa: F401

from dspark.config import GenerationConfig
from dspark.engine.generate import generate


@pytest.fixture(scope="module")
def url():
    with running_server() as base:
        yield base


def engine_run(prompt_ids: list[int], max_tokens: int, draft: bool = True):
    served = tiny_served()
    config = GenerationConfig(max_new_tokens=max_tokens, eos_token_ids=served.eos_token_ids)
    return generate(served.new_target(), served.draft if draft else None, prompt_ids, config)


def test_greedy_completion_equals_plain_greedy_decoding_and_reports_engine_stats(url):
    served = tiny_served()
    response = client(url).completions.create(model=served.name, prompt="Hello", max_tokens=40, temperature=0)
    ids = served.tokenizer("Hello")["input_ids"]
    plain = engine_run(ids, 40, draft=False)
    speculative = engine_run(ids, 40)
    assert response.choices[0].text == served.tokenizer.decode(plain.tokens, skip_special_tokens=True)
    assert response.choices[0].finish_reason == "stop"  # the tiny model ends at '~' with its EOS
    assert response.usage.prompt_tokens == len(ids)
    assert response.usage.completion_tokens == len(plain.tokens)
    assert response.usage.total_tokens == len(ids) + len(plain.tokens)
    spec = response.metrics["speculative_decoding"]
    drafted = [(p, a) for p, a in zip(speculative.stats.proposed_counts, speculative.stats.accepted_counts) if p]
    assert spec["num_spec_steps"] == len(drafted)
    assert spec["num_draft_tokens"] == sum(p for p, _ in drafted)
    assert spec["num_accepted_draft_tokens"] == sum(a for _, a in drafted)
    assert spec["mean_acceptance_length"] == pytest.approx(1 + sum(a for _, a in drafted) / len(drafted))
    assert spec["num_spec_tokens"] == 4 and len(spec["acceptance_histogram"]) == 5
    assert sum(spec["acceptance_histogram"]) == spec["num_spec_steps"]
    assert spec["num_accepted_tokens_per_pos"][0] == sum(1 for _, a in drafted if a >= 1)


def test_max_tokens_cuts_with_finish_reason_length(url):
    response = client(url).completions.create(model=tiny_served().name, prompt="a", max_tokens=3, temperature=0)
    assert response.choices[0].finish_reason == "length"
    assert response.usage.completion_tokens == 3


def test_chat_uses_the_tokenizers_chat_template(url):
    served = tiny_served()
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    response = client(url).chat.completions.create(model=served.name, messages=messages, temperature=0, max_tokens=8)
    text = served.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = served.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert response.usage.prompt_tokens == len(ids)
    assert response.choices[0].message.role == "assistant"
    assert response.choices[0].message.content == served.tokenizer.decode(engine_run(ids, 8).tokens)


def test_streamed_chat_matches_the_unstreamed_answer_and_ends_with_usage_and_spec_stats(url):
    name = tiny_served().name
    kwargs = dict(model=name, messages=[{"role": "user", "content": "count"}], temperature=0, max_tokens=20)
    whole = client(url).chat.completions.create(**kwargs)
    chunks = list(client(url).chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == [] and usage_chunk.usage.completion_tokens == 20
    assert usage_chunk.metrics["speculative_decoding"] == whole.metrics["speculative_decoding"]
    assert all(c.usage is None for c in chunks[:-1])


def test_stream_without_include_usage_has_no_usage_chunk(url):
    chunks = list(client(url).completions.create(model=tiny_served().name, prompt="Hello", max_tokens=5,
                                                 temperature=0, stream=True))
    assert all(c.choices for c in chunks) and all(c.usage is None for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "length"


@pytest.mark.parametrize("stream", [False, True])
def test_stop_string_cuts_the_text_before_it_and_finishes_with_stop(url, stream):
    api = client(url)
    name = tiny_served().name
    full = api.completions.create(model=name, prompt="Hello", max_tokens=12, temperature=0).choices[0].text
    stop = full[4:6]
    if stream:
        chunks = list(api.completions.create(model=name, prompt="Hello", max_tokens=12, temperature=0, stream=True,
                                             stop=[stop, "never"]))
        text = "".join(c.choices[0].text for c in chunks)
        reason = chunks[-1].choices[0].finish_reason
    else:
        choice = api.completions.create(model=name, prompt="Hello", max_tokens=12, temperature=0, stop=stop).choices[0]
        text, reason = choice.text, choice.finish_reason
    assert text == full[:4]
    assert reason == "stop"


def test_seeded_sampling_is_reproducible_and_top_k_one_is_greedy(url):
    api, name = client(url), tiny_served().name
    sampled = [api.completions.create(model=name, prompt="The", max_tokens=16, temperature=1.0, seed=7).choices[0].text
               for _ in range(2)]
    assert sampled[0] == sampled[1]
    greedy = api.completions.create(model=name, prompt="The", max_tokens=16, temperature=0).choices[0].text
    top1 = api.completions.create(model=name, prompt="The", max_tokens=16, temperature=1.5, seed=3,
                                  extra_body={"top_k": 1}).choices[0].text
    assert top1 == greedy


def test_token_id_prompt_equals_the_text_prompt(url):
    api, served = client(url), tiny_served()
    ids = served.tokenizer("Hello")["input_ids"]
    by_ids = api.completions.create(model=served.name, prompt=ids, max_tokens=10, temperature=0).choices[0].text
    by_text = api.completions.create(model=served.name, prompt="Hello", max_tokens=10, temperature=0).choices[0].text
    assert by_ids == by_text


def test_ignore_eos_runs_to_max_tokens(url):
    response = client(url).completions.create(model=tiny_served().name, prompt="x", max_tokens=30, temperature=0,
                                              extra_body={"ignore_eos": True})
    assert response.choices[0].finish_reason == "length" and response.usage.completion_tokens == 30


def test_models_lists_the_served_model_with_its_context_and_draft(url):
    models = client(url).models.list().data
    served = tiny_served()
    assert [m.id for m in models] == [served.name]
    assert models[0].max_model_len == served.context_length
    assert models[0].speculative["num_speculative_tokens"] == 4
