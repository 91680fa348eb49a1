"""`dspark monitor --once --json` against the real server: the τ it computes from the Prometheus counters equals
the τ of the engine's own stats for the same requests, and the per-request stats reconcile with the counters."""
from __future__ import annotations

import functools
import json

import pytest
from serve_support import client, tiny_served, running_server, scrape, single_thread, value  # noqa: F401

import dspark.deploy.monitor
from dspark.cli import main
from dspark.config import GenerationConfig
from dspark.engine.generate import generate
from dspark.serve.model_source import served_model

PROMPTS = ["Hello", "a", "The quick brown fox", "0", "xyz"]
MAX_TOKENS = 24


def run_monitor(url: str, traffic, monkeypatch, capsys) -> tuple[int, dict]:
    """Run `dspark monitor URL --once --json`; `traffic()` runs between its two scrapes (instead of sleeping)."""
    monkeypatch.setattr(dspark.deploy.monitor, "watch",
                        functools.partial(dspark.deploy.monitor.watch, sleep=lambda seconds: traffic()))
    code = main(["monitor", url, "--once", "--json", "--interval", "0.5"])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out.strip().splitlines()[-1]) if code == 0 else {"stderr": captured.err})


@pytest.mark.slow
def test_monitor_tau_matches_the_engine_stats_and_the_per_request_stats(monkeypatch, capsys):
    served = tiny_served()
    responses = []
    with running_server() as url:
        def traffic() -> None:
            api = client(url)
            responses.extend(api.completions.create(model=served.name, prompt=p, max_tokens=MAX_TOKENS,
                                                    temperature=0) for p in PROMPTS)

        code, snapshot = run_monitor(url, traffic, monkeypatch, capsys)
        samples = scrape(url)
    assert code == 0 and snapshot["server"] == "dspark" and snapshot["models"] == [served.name]
    # the engine, run directly on the same prompts (greedy, so the same rounds)
    rounds, verify_rounds = [], 0
    for prompt in PROMPTS:
        config = GenerationConfig(max_new_tokens=MAX_TOKENS, eos_token_ids=served.eos_token_ids)
        stats = generate(served.new_target(), served.draft, served.tokenizer(prompt)["input_ids"], config).stats
        rounds += [(p, a) for p, a in zip(stats.proposed_counts, stats.accepted_counts) if p > 0]
        verify_rounds += stats.rounds
    engine_tau = 1 + sum(a for _, a in rounds) / len(rounds)
    overall = snapshot["overall"]
    assert overall["drafts"] == len(rounds)
    assert overall["draft_tokens"] == sum(p for p, _ in rounds)
    assert overall["accepted"] == sum(a for _, a in rounds)
    assert overall["tau"] == pytest.approx(engine_tau, abs=1e-6)
    assert 1.5 < engine_tau < 5  # the tiny pair accepts some drafts, not all
    per_request = [r.metrics["speculative_decoding"] for r in responses]
    assert sum(s["num_spec_steps"] for s in per_request) == len(rounds)
    per_pos = [sum(s["num_accepted_tokens_per_pos"][k] for s in per_request) for k in range(4)]
    assert overall["per_position_rate"] == pytest.approx([c / len(rounds) for c in per_pos], abs=1e-6)
    assert [value(samples, "dspark:spec_decode_num_accepted_tokens_per_pos_total", position=str(k))
            for k in range(4)] == per_pos
    assert per_pos[0] >= per_pos[1] >= per_pos[2] >= per_pos[3] > 0
    assert value(samples, "dspark:request_success_total") == len(PROMPTS)
    assert value(samples, "dspark:time_to_first_token_seconds_count") == len(PROMPTS)
    assert value(samples, "dspark:inter_token_latency_seconds_count") == verify_rounds  # one per round


def test_monitor_tells_that_a_server_without_draft_is_not_speculating(monkeypatch, capsys):
    base = tiny_served()
    plain = served_model(base.hf_model, base.tokenizer, None, "plain")
    with running_server(plain) as url:
        assert client(url).completions.create(model="plain", prompt="Hi", max_tokens=3).usage.completion_tokens == 3
        code, result = run_monitor(url, lambda: None, monkeypatch, capsys)
    assert code == 2
    assert "speculative decoding is off" in result["stderr"] and "--draft" in result["stderr"]


def test_monitor_reads_a_server_started_with_an_api_key_only_when_given_the_key(capsys):
    with running_server(api_key="s3cret") as url:
        assert main(["monitor", url, "--once", "--json", "--interval", "0.05"]) == 2
        assert "--api-key" in capsys.readouterr().err
        assert main(["monitor", url, "--once", "--json", "--interval", "0.05", "--api-key", "s3cret"]) == 0
        assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["server"] == "dspark"
