"""Live doctor rules against recorded `/metrics` bodies served by a tiny loopback HTTP server, and
against SGLang `Decode batch` log lines; plus `prom_scrape` itself.

The bodies use the metric names, help strings and labels of vLLM (`vllm/v1/spec_decode/metrics.py`,
labels model_name/engine, counters exposed with `_total`) and SGLang (`srt/metrics/collector.py`,
gauges labelled model_name/engine_type/tp_rank/pp_rank/moe_ep_rank), as prometheus_client writes them.
"""
from __future__ import annotations

import http.server
import socket
import threading

import pytest
from test_doctor_support import doctor

from dspark.deploy.prom_scrape import ScrapeError, fetch_metrics_text, metrics_url, parse_samples

MODEL = "moonshotai/Kimi-K3"
VLLM_LABELS = f'engine="0",model_name="{MODEL}"'
SGLANG_LABELS = f'engine_type="unified",model_name="{MODEL}",moe_ep_rank="0",pp_rank="0",tp_rank="0"'


def vllm_body(drafts: float, accepted: float, k: int = 7) -> str:
    """A vLLM /metrics body: τ = 1 + accepted / drafts."""
    per_pos = "".join(
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{VLLM_LABELS},position="{p}"}} '
        f"{accepted * (0.5 ** (p + 1)):.1f}\n" for p in range(k))
    return (
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        f"vllm:num_requests_running{{{VLLM_LABELS}}} 12.0\n"
        "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.\n"
        "# TYPE vllm:spec_decode_num_drafts_total counter\n"
        f"vllm:spec_decode_num_drafts_total{{{VLLM_LABELS}}} {drafts}\n"
        "# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.\n"
        "# TYPE vllm:spec_decode_num_draft_tokens_total counter\n"
        f"vllm:spec_decode_num_draft_tokens_total{{{VLLM_LABELS}}} {drafts * k}\n"
        "# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.\n"
        "# TYPE vllm:spec_decode_num_accepted_tokens_total counter\n"
        f"vllm:spec_decode_num_accepted_tokens_total{{{VLLM_LABELS}}} {accepted}\n"
        "# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.\n"
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter\n" + per_pos
    )


VLLM_NO_SPEC = (
    "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
    "# TYPE vllm:num_requests_running gauge\n"
    f"vllm:num_requests_running{{{VLLM_LABELS}}} 3.0\n"
    "# HELP vllm:generation_tokens_total Number of generation tokens processed.\n"
    "# TYPE vllm:generation_tokens_total counter\n"
    f"vllm:generation_tokens_total{{{VLLM_LABELS}}} 52311.0\n"
)


def sglang_body(accept_length: float) -> str:
    return (
        "# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.\n"
        "# TYPE sglang:spec_accept_length gauge\n"
        f"sglang:spec_accept_length{{{SGLANG_LABELS}}} {accept_length}\n"
        "# HELP sglang:spec_accept_rate The average acceptance rate of speculative decoding "
        "(`accepted tokens / total draft tokens` in batch).\n"
        "# TYPE sglang:spec_accept_rate gauge\n"
        f"sglang:spec_accept_rate{{{SGLANG_LABELS}}} {(accept_length - 1) / 7:.4f}\n"
        "# HELP sglang:gen_throughput The generation throughput (token/s).\n"
        "# TYPE sglang:gen_throughput gauge\n"
        f"sglang:gen_throughput{{{SGLANG_LABELS}}} 2210.5\n"
    )


def decode_line(accept: float, graph: bool, running: int = 32) -> str:
    return (f"[2026-11-30 10:00:00 TP0] Decode batch, #running-req: {running}, #token: 81234, token usage: 0.21, "
            f"accept len: {accept:.2f}, accept rate: {(accept - 1) / 7:.2f}, cuda graph: {graph}, "
            "gen throughput (token/s): 1850.33, #queue-req: 0")


class _Handler(http.server.BaseHTTPRequestHandler):
    body = ""
    status = 200

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        data = self.body.encode()
        self.send_response(self.status if self.path == "/metrics" else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def serve():
    """serve(body, status=200) -> base URL of a loopback server answering GET /metrics with `body`."""
    servers = []

    def start(body: str, status: int = 200) -> str:
        handler = type("Handler", (_Handler,), {"body": body, "status": status})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def live_rules(**request) -> dict[str, list[str]]:
    report = doctor(**request)
    found: dict[str, list[str]] = {}
    for f in report.findings:
        found.setdefault(f.rule, []).append(f.severity)
    return found


def test_prom_scrape_reads_counters_under_their_total_names(serve) -> None:
    text = fetch_metrics_text(serve(vllm_body(1200, 3000)), timeout=2)
    samples = parse_samples(text)
    assert samples["vllm:spec_decode_num_drafts_total"] == [({"engine": "0", "model_name": MODEL}, 1200.0)]
    assert len(samples["vllm:spec_decode_num_accepted_tokens_per_pos_total"]) == 7


def test_prom_scrape_errors_say_what_to_check(serve) -> None:
    assert metrics_url("http://h:1/") == "http://h:1/metrics"
    with pytest.raises(ScrapeError, match="HTTP 404.*--enable-metrics"):
        fetch_metrics_text(serve("", status=404), timeout=2)
    with pytest.raises(ScrapeError, match="cannot reach"):
        fetch_metrics_text(closed_port_url(), timeout=2)
    with pytest.raises(ScrapeError, match="http://"):
        metrics_url("localhost:8000")


def test_unreachable_server_fires_and_a_reachable_one_is_quiet(serve) -> None:
    assert live_rules(url=closed_port_url())["LV-UNREACHABLE"] == ["error"]
    assert live_rules(url=serve("nope", status=404))["LV-UNREACHABLE"] == ["error"]
    assert "LV-UNREACHABLE" not in live_rules(url=serve(vllm_body(1200, 3000)))


def test_server_without_spec_metrics_fires_spec_off(serve) -> None:
    assert live_rules(url=serve(VLLM_NO_SPEC))["LV-SPEC-OFF"] == ["error"]
    assert "LV-SPEC-OFF" not in live_rules(url=serve(vllm_body(1200, 3000)))


def test_idle_server_reports_no_traffic(serve) -> None:
    assert live_rules(url=serve(vllm_body(0, 0)))["LV-NO-TRAFFIC"] == ["info"]
    assert "LV-NO-TRAFFIC" not in live_rules(url=serve(vllm_body(1200, 3000)))


@pytest.mark.parametrize("body", [vllm_body(1200, 30), sglang_body(1.02)], ids=["vllm", "sglang"])
def test_tau_near_one_fires_on_metrics(serve, body) -> None:
    assert live_rules(url=serve(body))["LV-TAU-ONE"] == ["error"]


@pytest.mark.parametrize("body", [vllm_body(1200, 3000), sglang_body(3.5)], ids=["vllm", "sglang"])
def test_healthy_tau_is_quiet(serve, body) -> None:
    assert live_rules(url=serve(body), expected_tau=3.6) == {}


def test_tau_far_below_recorded_value_warns_then_errors(serve) -> None:
    assert live_rules(url=serve(vllm_body(1000, 1500)), expected_tau=3.5)["LV-TAU-LOW"] == ["warning"]  # τ 2.5
    assert live_rules(url=serve(vllm_body(1000, 800)), expected_tau=3.5)["LV-TAU-LOW"] == ["error"]  # τ 1.8
    assert "LV-TAU-LOW" not in live_rules(url=serve(vllm_body(1000, 2200)), expected_tau=3.5)  # τ 3.2


def test_recorded_tau_is_read_from_the_draft_card(serve, tmp_path) -> None:
    from test_doctor_support import write_draft
    folder = write_draft(tmp_path / "draft")
    (folder / "card.json").write_text('{"expected_tau": 4.0}', encoding="utf-8")
    assert live_rules(url=serve(sglang_body(2.5)), draft=str(folder))["LV-TAU-LOW"] == ["warning"]


def test_sglang_log_tau_one_and_eager_steady_state_fire(tmp_path) -> None:
    log = tmp_path / "server.log"
    log.write_text("\n".join(["Prefill batch, #new-seq: 1, cuda graph: False"]
                             + [decode_line(1.00, False)] * 6), encoding="utf-8")
    found = live_rules(log_path=str(log))
    assert found["LV-TAU-ONE"] == ["error"] and found["LV-EAGER-STEADY"] == ["error"]


def test_sglang_log_eager_warmup_only_is_quiet_and_partial_eager_warns(tmp_path) -> None:
    warm = tmp_path / "warm.log"
    warm.write_text("\n".join([decode_line(3.4, False)] * 2 + [decode_line(3.4, True)] * 8), encoding="utf-8")
    assert live_rules(log_path=str(warm)) == {}
    partial = tmp_path / "partial.log"
    partial.write_text("\n".join([decode_line(3.4, True)] * 8 + [decode_line(3.4, False, running=80)] * 2),
                       encoding="utf-8")
    assert live_rules(log_path=str(partial))["LV-EAGER-STEADY"] == ["warning"]


def test_log_without_decode_lines_fires_log_empty(tmp_path) -> None:
    log = tmp_path / "empty.log"
    log.write_text("Load weight end. type=KimiK3ForConditionalGeneration\n", encoding="utf-8")
    assert live_rules(log_path=str(log))["LV-LOG-EMPTY"] == ["warning"]
    assert live_rules(log_path=str(tmp_path / "missing.log"))["LV-UNREACHABLE"] == ["error"]


def test_older_log_format_without_accept_rate_is_read(tmp_path) -> None:
    log = tmp_path / "old.log"
    line = ("Decode batch. #running-req: 4, #token: 900, token usage: 0.01, accept len: 2.80, cuda graph: True, "
            "gen throughput (token/s): 310.2, #queue-req: 0")
    log.write_text("\n".join([line] * 5), encoding="utf-8")
    assert live_rules(log_path=str(log), expected_tau=3.0) == {}
