"""The core CLI command `dspark info` (`dspark demo` is tested in test_demo.py)."""
from __future__ import annotations

import json

from dspark.cli import main


def test_info_reports_the_kimi_preset_parameter_count_and_kv_bytes(capsys):
    assert main(["info", "kimi-k3-dspark", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["parameters"] == 2_249_290_081
    assert data["bf16_weight_bytes"] == 2 * 2_249_290_081
    assert data["kv_bytes_per_token_bf16"] == 35_840
    assert data["config"]["target_layer_ids"] == [7, 23, 51, 67, 83]


def test_info_table_and_unknown_preset_error(capsys):
    assert main(["info", "qwen3-8b-dspark"]) == 0
    assert "[1, 9, 17, 25, 33]" in capsys.readouterr().out
    assert main(["info", "no-such-draft"]) == 2
    assert "unknown draft preset" in capsys.readouterr().out
