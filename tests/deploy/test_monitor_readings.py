"""Server detection and per-scrape totals from recorded vLLM, SGLang and dspark /metrics bodies."""
from __future__ import annotations

from pathlib import Path

import pytest

from dspark.deploy.monitor_readings import MonitorError, detect_server_kind, read_samples
from dspark.deploy.prom_scrape import parse_samples

FIXTURES = Path(__file__).parent / "fixtures"


def samples_of(name: str) -> dict:
    return parse_samples((FIXTURES / name).read_text())


@pytest.mark.parametrize("engine", ["vllm", "sglang", "dspark"])
def test_each_recorded_body_is_detected_as_its_server(engine):
    for i in range(3):
        assert detect_server_kind(samples_of(f"monitor_{engine}_{i}.prom")) == engine


def test_vllm_reading_sums_the_spec_counters_and_keeps_positions_in_order():
    r = read_samples(samples_of("monitor_vllm_1.prom"), "vllm", time=10.0)
    assert r.kind == "vllm" and r.models == ("Qwen/Qwen3-8B",)
    assert (r.drafts, r.draft_tokens, r.accepted) == (1500.0, 10500.0, 5150.0)
    assert r.accepted_per_pos == (1270.0, 1060.0, 860.0, 690.0, 530.0, 410.0, 330.0)
    assert sum(r.accepted_per_pos) == r.accepted
    assert r.requests == 19.0  # request_success_total summed over finished_reason
    assert r.ttft_count == 19.0 and r.itl_count == 1500.0
    assert (r.queue, r.running) == (1.0, 5.0)
    assert r.accept_length is None and r.gen_throughput is None


def test_sglang_reading_takes_the_window_gauges_and_has_no_spec_counters():
    r = read_samples(samples_of("monitor_sglang_1.prom"), "sglang", time=0.0)
    assert (r.accept_length, r.accept_rate, r.gen_throughput) == (4.12, 0.446, 655.02)
    assert r.drafts is None and r.accepted is None and r.accepted_per_pos == ()
    assert r.generation_tokens == 12600.0 and r.requests == 26.0
    assert (r.queue, r.running) == (1.0, 7.0)


def test_dspark_reading_uses_the_dspark_prefix():
    r = read_samples(samples_of("monitor_dspark_2.prom"), "dspark", time=0.0)
    assert r.models == ("smollm2-135m-instruct",)
    assert (r.drafts, r.draft_tokens, r.accepted) == (1900.0, 13300.0, 6350.0)
    assert len(r.accepted_per_pos) == 7


VLLM_TWO_ENGINES = """\
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="a"} 10.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="a"} 30.0
vllm:spec_decode_num_drafts_total{engine="0",model_name="b"} 5.0
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="a",position="1"} 4.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="a",position="0"} 9.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="a",position="0"} 20.0
"""


def test_counters_are_summed_over_engines_and_can_be_filtered_by_model():
    samples = parse_samples(VLLM_TWO_ENGINES)
    everything = read_samples(samples, "vllm", time=0.0)
    assert everything.drafts == 45.0 and everything.models == ("a", "b")
    only_a = read_samples(samples, "vllm", time=0.0, model="a")
    assert only_a.drafts == 40.0
    assert only_a.accepted_per_pos == (29.0, 4.0)
    with pytest.raises(MonitorError, match="served models: a, b"):
        read_samples(samples, "vllm", time=0.0, model="c")


SGLANG_TWO_RANKS = """\
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{dp_rank="0",model_name="m"} 3.0
sglang:spec_accept_length{dp_rank="1",model_name="m"} 5.0
sglang:spec_accept_length{dp_rank="2",model_name="m"} 0.0
# TYPE sglang:spec_accept_rate gauge
sglang:spec_accept_rate{dp_rank="0",model_name="m"} 0.2
sglang:spec_accept_rate{dp_rank="1",model_name="m"} 0.6
sglang:spec_accept_rate{dp_rank="2",model_name="m"} 0.0
"""


def test_sglang_gauges_average_only_the_ranks_that_measured_a_window():
    r = read_samples(parse_samples(SGLANG_TWO_RANKS), "sglang", time=0.0)
    assert r.accept_length == pytest.approx(4.0)
    assert r.accept_rate == pytest.approx(0.4)


def test_sglang_that_never_measured_a_window_has_no_accept_length():
    text = '# TYPE sglang:spec_accept_length gauge\nsglang:spec_accept_length{model_name="m"} 0.0\n'
    assert read_samples(parse_samples(text), "sglang", time=0.0).accept_length is None


def test_vllm_without_speculative_decoding_is_reported_with_the_flag_to_set():
    text = '# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{engine="0",model_name="m"} 5.0\n'
    with pytest.raises(MonitorError, match="--speculative-config"):
        detect_server_kind(parse_samples(text))


def test_a_body_from_something_else_is_rejected_with_what_to_point_at():
    text = "# TYPE node_load1 gauge\nnode_load1 0.5\n"
    with pytest.raises(MonitorError, match="dspark:, vllm: or sglang:"):
        detect_server_kind(parse_samples(text))


def test_dspark_wins_when_a_body_carries_both_prefixes():
    text = ("# TYPE vllm:spec_decode_num_drafts_total counter\nvllm:spec_decode_num_drafts_total 1.0\n"
            "# TYPE dspark:spec_decode_num_drafts_total counter\ndspark:spec_decode_num_drafts_total 1.0\n")
    assert detect_server_kind(parse_samples(text)) == "dspark"
