"""`dspark doctor`: find silent misconfigurations in an engine launch command, a draft, or a live server.

Parsing and printing only; the inputs are gathered and judged by `dspark.deploy.doctor` and its rules.
Exit status: 0 no errors, 1 at least one error-severity finding, 2 unusable input.
"""
from __future__ import annotations

import argparse
import json
import sys

EPILOG = """\
examples:
  dspark doctor "python -m sglang.launch_server --model-path moonshotai/Kimi-K3 --speculative-algorithm DSPARK ..."
  dspark doctor --file launch.sh --draft ./my-draft --target-config ./target/config.json --context 1M
  dspark doctor --url http://127.0.0.1:30000 --log sglang.log --expected-tau 3.4
  dspark doctor --list-rules
"""

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _size(text: str) -> int:
    from dspark.deploy.cmdline import parse_int

    try:
        return parse_int(text, "--context")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def register(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("command", nargs="?",
                        help="the launch command as one string (SGLang, vLLM or trtllm-serve)")
    parser.add_argument("--file", help="read the launch command(s) from this file ('-' = stdin)")
    parser.add_argument("--draft", help="draft checkpoint folder (or config.json, or preset name)")
    parser.add_argument("--target-config", help="target config.json (or its folder, or preset name)")
    parser.add_argument("--context", type=_size, help="longest prompt + output users will send (128k, 1M, …)")
    parser.add_argument("--url", help="live server root or /metrics URL")
    parser.add_argument("--log", help="SGLang server log (its `Decode batch … accept len … cuda graph` lines)")
    parser.add_argument("--llm-api-options", help="TensorRT-LLM LLM-API options YAML (else the command's own)")
    parser.add_argument("--expected-tau", type=float, help="the τ the draft should reach (else its card.json)")
    parser.add_argument("--timeout", type=float, default=5.0, help="HTTP timeout for --url in seconds (default 5)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--list-rules", action="store_true", help="list every rule and exit")


def _command_text(args: argparse.Namespace) -> str | None:
    if args.command and args.file:
        raise ValueError("give the command either as a string or with --file, not both")
    if args.file == "-":
        return sys.stdin.read()
    if args.file:
        try:
            with open(args.file, encoding="utf-8") as handle:
                return handle.read()
        except OSError as exc:
            raise ValueError(f"cannot read --file {args.file}: {exc}") from exc
    return args.command


def _list_rules(as_json: bool) -> int:
    from dspark.deploy.doctor import all_rules

    rules = all_rules()
    if as_json:
        print(json.dumps([{"rule": r.id, "severity": r.severity, "title": r.title, "why": r.why} for r in rules]))
        return 0
    for rule in rules:
        print(f"{rule.id:28} {rule.severity:8} {rule.title}")
    return 0


def _print_report(report) -> None:
    from rich.console import Console
    from rich.markup import escape

    console = Console(highlight=False, soft_wrap=True)
    console.print(f"dspark doctor checked: {', '.join(report.checked) or 'nothing'}")
    for f in report.findings:
        style = _STYLE[f.severity]
        console.print(f"\n[{style}]{f.severity.upper():7}[/{style}] [bold]{f.rule}[/bold]  {escape(f.title)}")
        console.print(f"  what: {escape(f.what)}")
        console.print(f"  why:  {escape(f.why)}")
        console.print(f"  fix:  {escape(f.fix)}")
        if f.evidence:
            console.print(f"  seen: {escape(f.evidence)}")
    if not report.findings:
        console.print("no findings")
    summary = {"errors": report.count("error"), "warnings": report.count("warning"), "infos": report.count("info"),
               "exit_status": report.exit_status, "rules": sorted(report.rule_ids())}
    print()
    print(json.dumps(summary))


def run(args: argparse.Namespace) -> int:
    if args.list_rules:
        return _list_rules(args.json)
    from dspark.deploy.doctor import DoctorRequest, diagnose

    try:
        request = DoctorRequest(
            command_text=_command_text(args), draft=args.draft, target_config=args.target_config,
            context=args.context, url=args.url, log_path=args.log, llm_api_options_path=args.llm_api_options,
            expected_tau=args.expected_tau, timeout=args.timeout,
        )
        report = diagnose(request)
    except ValueError as exc:
        print(f"dspark doctor: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        _print_report(report)
    return report.exit_status
