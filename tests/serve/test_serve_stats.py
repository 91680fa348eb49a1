"""Per-request speculative stats (vLLM's `metrics.speculative_decoding` shape), the Prometheus metrics the
monitor reads, and request-schema normalisation."""
from __future__ import annotations

import pytest

from dspark.deploy.monitor_readings import detect_server_kind, read_samples
from dspark.deploy.prom_scrape import parse_samples
from dspark.serve.metrics import ServerMetrics
from dspark.serve.schemas import ChatCompletionRequest, CompletionRequest
from dspark.serve.spec_stats import SpecTally

ROUNDS = [(4, 2), (4, 0), (0, 0), (3, 3), (4, 4)]  # (proposed, accepted); the (0, 0) round drafted nothing


def test_spec_tally_matches_vllm_fields_and_skips_rounds_without_drafts():
    tally = SpecTally(num_spec_tokens=4)
    assert [tally.add_round(p, a) for p, a in ROUNDS] == [True, True, False, True, True]
    stats = tally.to_dict()
    assert stats == {
        "mean_acceptance_length": pytest.approx(1 + 9 / 4),
        "draft_acceptance_rate": pytest.approx(9 / 15),
        "acceptance_histogram": [1, 0, 1, 1, 1],
        "acceptance_histogram_by_draft_length": {"3": [0, 0, 0, 1], "4": [1, 0, 1, 0, 1]},
        "num_spec_steps": 4,
        "num_accepted_draft_tokens": 9,
        "num_draft_tokens": 15,
        "num_spec_tokens": 4,
        "num_accepted_tokens_per_pos": [3, 3, 2, 1],
    }
    detailed = tally.to_dict(detailed=True)
    assert detailed["per_step_accepted"] == [2, 0, 3, 4] and detailed["per_step_drafted"] == [4, 4, 3, 4]


def test_a_request_that_never_drafted_reports_tau_one_and_empty_counts():
    stats = SpecTally(num_spec_tokens=4).to_dict()
    assert stats["mean_acceptance_length"] == 1.0 and stats["num_spec_steps"] == 0
    assert stats["acceptance_histogram"] == [0] * 5 and stats["draft_acceptance_rate"] == 0.0


def test_a_round_cannot_accept_more_than_it_proposed():
    with pytest.raises(ValueError, match="cannot accept 5 of 4"):
        SpecTally(num_spec_tokens=4).add_round(4, 5)


def test_prometheus_counters_read_by_the_monitor_give_the_same_tau_as_the_tally():
    metrics, tally = ServerMetrics("m", num_spec_tokens=4), SpecTally(4)
    for proposed, accepted in ROUNDS:
        metrics.observe_round(proposed, accepted)
        tally.add_round(proposed, accepted)
    metrics.finished("stop")
    samples = parse_samples(metrics.render().decode())
    assert detect_server_kind(samples) == "dspark"
    reading = read_samples(samples, "dspark", time=0.0)
    assert (reading.drafts, reading.draft_tokens, reading.accepted) == (4, 15, 9)
    assert reading.accepted_per_pos == (3, 3, 2, 1)
    assert 1 + reading.accepted / reading.drafts == tally.mean_acceptance_length
    assert reading.requests == 1 and reading.models == ("m",)


def test_each_server_gets_its_own_registry_and_plain_servers_have_no_spec_counters():
    first, second = ServerMetrics("a", 4), ServerMetrics("b", 0)  # same metric names, no clash
    first.observe_round(4, 1)
    text = second.render().decode()
    assert "dspark:generation_tokens_total" in text and "spec_decode" not in text
    assert 'dspark:spec_decode_num_drafts_total{model_name="a"} 1.0' in first.render().decode()


def test_prompt_and_stop_are_normalised():
    assert CompletionRequest.model_validate({"prompt": [[1, 2]]}).prompt == [1, 2]
    assert CompletionRequest.model_validate({"prompt": ["hi"]}).prompt == "hi"
    request = CompletionRequest.model_validate({"prompt": "hi", "stop": "\n", "unknown_field": 1})
    assert request.stop == ("\n",)
    assert CompletionRequest.model_validate({"prompt": "hi"}).stop == ()
    chat = ChatCompletionRequest.model_validate(
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                      {"role": "assistant", "content": None}]})
    assert [m.content for m in chat.messages] == ["ab", ""]
