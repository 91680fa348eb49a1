"""`dspark monitor URL`: watch speculative-decoding acceptance of a dspark / vLLM / SGLang server live.

Parsing and printing only; the scraping, window math and alerts live in `dspark.deploy.monitor*`.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported lazily at run time, like every command's heavy parts
    from dspark.deploy.monitor import Monitor, Snapshot
    from dspark.deploy.monitor_alerts import AlertConfig

EPILOG = """\
modes:
  (default)      live view (rich table + τ sparkline), one scrape every --interval s, until Ctrl-C,
                 --iterations windows or --duration seconds
  --once         one snapshot: two scrapes --interval s apart (counters only mean something as deltas)
  --json         JSON instead of the table: one object with --once, one line per window when live
  --check        exit status 1 if any alert fired (with --once or a bounded live run, for scripts / CI)

alerts: tau-mismatch (τ ≈ 1.0: draft/engine layout or convention mismatch), tau-below-min (--min-tau),
  tau-below-expected (< --expected-margin × the τ from --expected-tau or --draft DIR's card.json),
  acceptance-collapse (τ−1 of the last --collapse-windows windows fell by --collapse-drop vs earlier).

examples:
  dspark monitor http://127.0.0.1:8000
  dspark monitor http://10.0.0.5:30000/metrics --once --json --interval 10
  dspark monitor http://127.0.0.1:8000 --duration 60 --draft ./my-draft --check
"""


def register(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("url", help="server root or its /metrics URL (dspark, vLLM, or SGLang with --enable-metrics)")
    parser.add_argument("--api-key", help="Bearer key, for a server started with --api-key")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between scrapes (default 2)")
    bound = parser.add_mutually_exclusive_group()
    bound.add_argument("--once", action="store_true", help="print one snapshot (two scrapes --interval apart) and exit")
    bound.add_argument("--iterations", type=int, help="stop after this many windows")
    bound.add_argument("--duration", type=float, help="stop after this many seconds")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the rich view")
    parser.add_argument("--check", action="store_true", help="exit status 1 if any alert fired")
    parser.add_argument("--model", help="only this model_name (servers that serve several)")
    parser.add_argument("--timeout", type=float, default=5.0, help="HTTP timeout per scrape in seconds (default 5)")
    alerts = parser.add_argument_group("alert thresholds")
    alerts.add_argument("--min-tau", type=float, help="alert when mean τ falls below this")
    expected = alerts.add_mutually_exclusive_group()
    expected.add_argument("--expected-tau", type=float, help="the τ this draft should reach")
    expected.add_argument("--draft", help="draft folder whose card.json (or config.json) records its expected τ")
    alerts.add_argument("--expected-margin", type=float, default=0.8,
                        help="alert when τ < margin × expected τ (default 0.8)")
    alerts.add_argument("--mismatch-tau", type=float, default=1.1,
                        help="τ at or below this is reported as a layout/convention mismatch (default 1.1)")
    alerts.add_argument("--collapse-drop", type=float, default=0.3,
                        help="alert when τ−1 of recent windows fell by this fraction (default 0.3)")
    alerts.add_argument("--collapse-windows", type=int, default=3,
                        help="recent windows compared with earlier ones (default 3; needs twice as many)")
    alerts.add_argument("--min-drafts", type=float, default=16,
                        help="dspark/vLLM: ignore τ measured over fewer verified drafts (default 16)")


def _alert_config(args: argparse.Namespace) -> AlertConfig:
    from dspark.deploy.monitor_alerts import AlertConfig
    from dspark.deploy.monitor_expected import expected_tau_from_draft

    expected, source = args.expected_tau, "--expected-tau"
    if args.draft:
        expected, source = expected_tau_from_draft(args.draft)
    return AlertConfig(
        min_tau=args.min_tau, expected_tau=expected, expected_source=source,
        expected_margin=args.expected_margin, mismatch_tau=args.mismatch_tau,
        collapse_drop=args.collapse_drop, collapse_windows=args.collapse_windows, min_drafts=args.min_drafts,
    )


def _watch(args: argparse.Namespace, monitor: Monitor) -> Snapshot:
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    from dspark.deploy.monitor import snapshot_to_dict, watch
    from dspark.deploy.monitor_view import render_snapshot

    iterations = 1 if args.once else args.iterations
    if args.json:
        def emit(snapshot) -> None:
            if not args.once:
                print(json.dumps(snapshot_to_dict(snapshot)), flush=True)

        snapshot = watch(monitor, interval=args.interval, iterations=iterations, duration=args.duration,
                         on_snapshot=emit)
        if args.once:
            print(json.dumps(snapshot_to_dict(snapshot)))
        return snapshot
    console = Console()
    if args.once:
        snapshot = watch(monitor, interval=args.interval, iterations=1)
        console.print(render_snapshot(snapshot))
        return snapshot
    with Live(Text(f"scraping {args.url} every {args.interval:g} s …"), console=console,
              refresh_per_second=4) as live:
        snapshot = watch(monitor, interval=args.interval, iterations=iterations, duration=args.duration,
                         on_snapshot=lambda snap: live.update(render_snapshot(snap)))
        live.update(render_snapshot(snapshot))
    if not console.is_terminal:
        console.line()  # Live leaves its last frame without a newline when not on a terminal
    return snapshot


def run(args: argparse.Namespace) -> int:
    import functools

    from dspark.deploy.monitor import Monitor
    from dspark.deploy.prom_scrape import fetch_metrics_text

    try:
        fetch = functools.partial(fetch_metrics_text, api_key=args.api_key)
        monitor = Monitor(args.url, alert_config=_alert_config(args), timeout=args.timeout, model=args.model,
                          fetch=fetch)
        snapshot = _watch(args, monitor)
    except ValueError as exc:
        print(f"dspark monitor: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 1 if args.check and snapshot.alerts else 0
