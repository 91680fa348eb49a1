"""`dspark monitor URL` end to end against a loopback HTTP server serving recorded /metrics bodies."""
from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import prometheus_client
import pytest

from dspark.cli import main
from dspark.deploy.monitor import Monitor

FIXTURES = Path(__file__).parent / "fixtures"
FAST = ["--interval", "0.01"]


@contextmanager
def metrics_server(bodies: list[str]):
    """Serve `bodies` one per GET /metrics (the last repeats) on 127.0.0.1:<ephemeral>; yields the root URL."""
    served = {"count": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server API
            if self.path != "/metrics":
                self.send_error(404)
                return
            body = bodies[min(served["count"], len(bodies) - 1)].encode()
            served["count"] += 1
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", served
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def recorded(engine: str) -> list[str]:
    return [(FIXTURES / f"monitor_{engine}_{i}.prom").read_text() for i in range(3)]


def dspark_body(drafts: float, accepted: float, per_pos: list[float], block: int = 7) -> str:
    """A dspark /metrics body in prometheus_client's text format (counters with _total samples)."""
    lines = []
    label = 'model_name="smollm2-135m-instruct"'
    for name, help_text, value in [
        ("spec_decode_num_drafts", "Number of spec decoding drafts.", drafts),
        ("spec_decode_num_draft_tokens", "Number of draft tokens.", drafts * block),
        ("spec_decode_num_accepted_tokens", "Number of accepted tokens.", accepted),
        ("generation_tokens", "Number of generation tokens processed.", drafts + accepted),
    ]:
        lines += [f"# HELP dspark:{name}_total {help_text}", f"# TYPE dspark:{name}_total counter",
                  f"dspark:{name}_total{{{label}}} {float(value)}"]
    lines += ["# HELP dspark:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.",
              "# TYPE dspark:spec_decode_num_accepted_tokens_per_pos_total counter"]
    lines += [f'dspark:spec_decode_num_accepted_tokens_per_pos_total{{{label},position="{k}"}} {float(v)}'
              for k, v in enumerate(per_pos)]
    return "\n".join(lines) + "\n"


def run_json(capsys, url: str, *args: str) -> tuple[int, list[dict]]:
    rc = main(["monitor", url, *FAST, "--json", *args])
    out = capsys.readouterr().out
    return rc, [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize("engine, tau, rate, first_pos", [
    ("vllm", 4.5, 0.5, 0.9), ("dspark", 4.5, 0.5, 0.9), ("sglang", 4.12, 0.446, None),
])
def test_once_json_prints_one_snapshot_per_server_kind(capsys, engine, tau, rate, first_pos):
    with metrics_server(recorded(engine)) as (url, served):
        rc, lines = run_json(capsys, url, "--once")
    assert rc == 0 and served["count"] == 2 and len(lines) == 1
    snap = lines[0]
    assert snap["server"] == engine and snap["status"] == "ok" and snap["scrapes"] == 2
    assert snap["url"] == url + "/metrics"
    assert snap["window"]["tau"] == tau and snap["window"]["acceptance_rate"] == rate
    positions = snap["window"]["per_position_acceptance"]
    assert (positions[0] if positions else None) == first_pos
    assert snap["alerts"] == []


def test_check_exit_status_follows_the_alerts(capsys):
    with metrics_server(recorded("vllm")) as (url, _):
        rc, lines = run_json(capsys, url, "--once", "--check", "--min-tau", "5")
    assert rc == 1 and [a["code"] for a in lines[0]["alerts"]] == ["tau-below-min"]
    with metrics_server(recorded("vllm")) as (url, _):
        rc, lines = run_json(capsys, url, "--once", "--check", "--min-tau", "4")
    assert rc == 0 and lines[0]["alerts"] == []


def test_alerts_without_check_still_exit_zero(capsys):
    with metrics_server(recorded("vllm")) as (url, _):
        rc, lines = run_json(capsys, url, "--once", "--min-tau", "5")
    assert rc == 0 and lines[0]["status"] == "alert"


def test_tau_near_one_reports_a_layout_mismatch(capsys):
    bodies = [dspark_body(0, 0, [0] * 7), dspark_body(400, 6, [5, 1, 0, 0, 0, 0, 0])]
    with metrics_server(bodies) as (url, _):
        rc, lines = run_json(capsys, url, "--once", "--check")
    assert rc == 1
    (alert,) = lines[0]["alerts"]
    assert alert["code"] == "tau-mismatch" and "layout/convention mismatch" in alert["message"]
    assert lines[0]["window"]["tau"] == 1.015


def test_expected_tau_from_the_draft_card(capsys, tmp_path):
    (tmp_path / "card.json").write_text(json.dumps({"tau": {"humaneval": 6.1, "mtbench": 5.9}}))
    with metrics_server(recorded("dspark")) as (url, _):
        rc, lines = run_json(capsys, url, "--once", "--check", "--draft", str(tmp_path))
    assert rc == 1
    (alert,) = lines[0]["alerts"]
    assert alert["code"] == "tau-below-expected" and "5.90" in alert["message"]
    with metrics_server(recorded("dspark")) as (url, _):
        rc, _ = run_json(capsys, url, "--once", "--check", "--expected-tau", "5.0")
    assert rc == 0  # 4.5 ≥ 0.8 × 5.0


def test_an_idle_server_is_reported_idle_and_passes_check(capsys):
    body = recorded("vllm")[0]
    with metrics_server([body, body]) as (url, _):
        rc, lines = run_json(capsys, url, "--once", "--check", "--min-tau", "3")
    assert rc == 0 and lines[0]["status"] == "idle"
    assert lines[0]["window"]["tau"] is None and lines[0]["window"]["drafts"] == 0


def test_live_json_streams_one_line_per_window_and_catches_a_collapse(capsys):
    drafts, accepted, bodies = 0, 0, []
    per_pos = [0.0] * 7
    for gain in [0, 3.5, 3.5, 3.5, 0.8, 0.8, 0.8]:  # τ 4.5 for three windows, then 1.8
        drafts += 100 if gain else 0
        accepted += gain * 100
        bodies.append(dspark_body(drafts, accepted, per_pos))
    with metrics_server(bodies) as (url, _):
        rc, lines = run_json(capsys, url, "--iterations", "6", "--check")
    assert rc == 1 and len(lines) == 6
    assert [line["window"]["tau"] for line in lines] == [4.5, 4.5, 4.5, 1.8, 1.8, 1.8]
    assert [line["status"] for line in lines] == ["ok"] * 5 + ["alert"]
    (alert,) = lines[-1]["alerts"]
    assert alert["code"] == "acceptance-collapse" and "4.50" in alert["message"] and "1.80" in alert["message"]
    assert lines[-1]["overall"]["tau"] == pytest.approx(1 + (3 * 350 + 3 * 80) / 600, abs=1e-6)


def test_live_view_prints_the_table_and_sparkline(capsys):
    with metrics_server(recorded("vllm")) as (url, _):
        rc = main(["monitor", url, *FAST, "--iterations", "2"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "dspark monitor · vllm · Qwen/Qwen3-8B" in out and "mean τ" in out
    assert "4.00" in out and "4.28" in out and "τ █▇" in out and "no alerts" in out


def test_once_table_for_sglang_says_the_numbers_are_gauges(capsys):
    with metrics_server(recorded("sglang")) as (url, _):
        rc = main(["monitor", url + "/metrics", *FAST, "--once"])
    out = capsys.readouterr().out
    assert rc == 0 and "4.12" in out and "window gauges" in out


@pytest.mark.parametrize("body, message", [
    ("# TYPE node_load1 gauge\nnode_load1 0.5\n", "dspark:, vllm: or sglang:"),
    ('# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{engine="0"} 1.0\n',
     "--speculative-config"),
    ("this is not prometheus text {{{\n", "not Prometheus text"),
])
def test_servers_that_cannot_be_monitored_exit_2_with_one_clear_line(capsys, body, message):
    with metrics_server([body]) as (url, _):
        rc = main(["monitor", url, *FAST, "--once"])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_unreachable_url_and_bad_arguments_exit_2(capsys, tmp_path):
    with metrics_server(["x"]) as (url, _):
        pass  # the port is closed now
    assert main(["monitor", url, *FAST, "--once", "--timeout", "2"]) == 2
    assert "cannot reach" in capsys.readouterr().err
    assert main(["monitor", "127.0.0.1:8000", "--once"]) == 2
    assert "http://" in capsys.readouterr().err
    assert main(["monitor", "http://127.0.0.1:1", "--once", "--draft", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["monitor", "http://127.0.0.1:1", "--once", "--collapse-drop", "2"]) == 2
    assert "--collapse-drop" in capsys.readouterr().err


def test_reads_what_prometheus_client_serves_for_dspark_counters():
    """The dspark server exposes its counters with prometheus_client: read them off its own HTTP server."""
    registry = prometheus_client.CollectorRegistry()
    labels = ["model_name"]
    drafts = prometheus_client.Counter("dspark:spec_decode_num_drafts", "Number of spec decoding drafts.",
                                       labels, registry=registry).labels("tiny")
    draft_tokens = prometheus_client.Counter("dspark:spec_decode_num_draft_tokens", "Number of draft tokens.",
                                             labels, registry=registry).labels("tiny")
    accepted = prometheus_client.Counter("dspark:spec_decode_num_accepted_tokens", "Number of accepted tokens.",
                                         labels, registry=registry).labels("tiny")
    per_pos = prometheus_client.Counter("dspark:spec_decode_num_accepted_tokens_per_pos",
                                        "Accepted tokens per draft position.", labels + ["position"],
                                        registry=registry)
    waiting = prometheus_client.Gauge("dspark:num_requests_waiting", "Requests waiting.", labels,
                                      registry=registry).labels("tiny")
    server, thread = prometheus_client.start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        monitor = Monitor(f"http://127.0.0.1:{server.server_port}")
        monitor.scrape()
        drafts.inc(10)
        draft_tokens.inc(70)
        accepted.inc(25)
        for position, count in enumerate([9, 8, 5, 3]):
            per_pos.labels("tiny", str(position)).inc(count)
        waiting.set(3)
        window = monitor.scrape()
        snap = monitor.snapshot()
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert snap.kind == "dspark" and snap.models == ("tiny",)
    assert window.tau == 3.5 and window.acceptance_rate == pytest.approx(25 / 70)
    assert window.per_position == pytest.approx((0.9, 8 / 9, 5 / 8, 3 / 5))
    assert window.queue == 3.0
