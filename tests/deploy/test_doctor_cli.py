"""`dspark doctor` and `dspark launch` through `dspark.cli.main`: output, --json, exit statuses."""
from __future__ import annotations

import json
import os

import pytest
from test_doctor_support import sglang

from dspark.cli import main
from dspark.deploy.doctor import all_rules


def test_doctor_exits_1_on_an_error_and_prints_what_why_fix(capsys) -> None:
    status = main(["doctor", sglang(set_={"--speculative-num-draft-tokens": "5"})])
    out = capsys.readouterr().out
    assert status == 1
    assert "ERROR" in out and "SG-DSPARK-NUM-DRAFT-TOKENS" in out
    assert "what:" in out and "why:" in out and "fix:" in out
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["exit_status"] == 1 and "SG-DSPARK-NUM-DRAFT-TOKENS" in summary["rules"]


def test_doctor_json_is_one_object_and_exit_0_without_errors(capsys) -> None:
    status = main(["doctor", sglang(), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert status == 0
    assert report["errors"] == 0 and report["exit_status"] == 0
    assert [f["rule"] for f in report["findings"]] == ["PAR-DCP-PREFILL-GRAPHS"]
    assert set(report["findings"][0]) == {"rule", "severity", "title", "what", "why", "fix", "evidence"}


def test_doctor_reads_a_file_and_accepts_context_suffixes(tmp_path, capsys) -> None:
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/bash\n# comment\nexport SGLANG_RAGGED_VERIFY_MODE=compact\n"
                      + sglang(env={}).replace(" --", " \\\n  --"), encoding="utf-8")
    status = main(["doctor", "--file", str(script), "--context", "2M", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert status == 1
    assert "CK-CONTEXT-RANGE" in {f["rule"] for f in report["findings"]}  # 2,097,152 > the draft's 1,048,576


@pytest.mark.parametrize("argv,message", [
    (["doctor"], "nothing to check"),
    (["doctor", "echo hi"], "no SGLang"),
    (["doctor", "vllm serve m", "--file", "x.sh"], "either as a string or with --file"),
    (["doctor", "--file", "/nonexistent/run.sh"], "cannot read --file"),
])
def test_doctor_bad_input_exits_2_with_one_message(argv, message, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_doctor_lists_every_rule(capsys) -> None:
    assert main(["doctor", "--list-rules", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["rule"] for r in listed] == [r.id for r in all_rules()]


def test_launch_prints_a_script_the_doctor_accepts(tmp_path, capsys) -> None:
    out_file = tmp_path / "launch.sh"
    assert main(["launch", "--engine", "sglang", "--draft", "kimi-k3-dspark", "--target", "kimi-k3",
                 "--gpus-per-node", "8", "--nodes", "2", "--output", str(out_file)]) == 0
    printed = capsys.readouterr().out
    assert "--speculative-algorithm DSPARK" in printed and "# dspark doctor on this script: 0 errors" in printed
    assert os.access(out_file, os.X_OK) and out_file.read_text().startswith("#!/usr/bin/env bash\n")
    assert main(["doctor", "--file", str(out_file)]) == 0


def test_launch_json_and_refusal(capsys) -> None:
    assert main(["launch", "--engine", "trtllm", "--draft", "kimi-k3-dspark", "--target", "kimi-k3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["llm_api_options"]["speculative_config"]["max_draft_len"] == 7
    assert data["layout"]["tp"] == 8 and data["doctor"]["errors"] == 0
    assert main(["launch", "--engine", "vllm", "--draft", "kimi-k3-dspark", "--target", "kimi-k3",
                 "--context", "4M"]) == 2
    err = capsys.readouterr().err
    assert "would not pass `dspark doctor`" in err and "CK-CONTEXT-RANGE" in err
