"""`dspark export` / `dspark import`: human and JSON output, exit status 2 with a clear message on bad input."""
from __future__ import annotations

import json

from dspark.cli import main
from formats_support import CONFORMANCE, TARGET_DIR, make_native


def test_export_prints_a_table_and_writes_the_layout(tmp_path, capsys):
    src = make_native(tmp_path, "tiny")
    assert main(["export", str(src), str(tmp_path / "out"), "--layout", "deepspec", "--target", str(TARGET_DIR)]) == 0
    shown = capsys.readouterr().out
    assert "native → deepspec" in shown and "vLLM aux ids [1, 3, 5]" in shown
    assert json.loads((tmp_path / "out" / "config.json").read_text())["architectures"] == ["Qwen3DSparkModel"]


def test_import_json_reports_the_detected_layout(tmp_path, capsys):
    src = CONFORMANCE / "specforge" / "vanilla" / "draft"
    assert main(["import", str(src), str(tmp_path / "native"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["source_layout"] == "specforge" and report["layout"] == "native"
    assert report["target_layer_ids"] == [0, 2, 4] and report["mask_token_id"] == 96 and report["block_size"] == 4
    assert report["embeddings"] is False


def test_import_of_an_ambiguous_checkpoint_exits_2_naming_the_field(tmp_path, capsys):
    src = make_native(tmp_path, "tiny")
    out = tmp_path / "spec"
    assert main(["export", str(src), str(out), "--layout", "speculators", "--target", str(TARGET_DIR)]) == 0
    config = json.loads((out / "config.json").read_text())
    del config["sample_from_anchor"]
    (out / "config.json").write_text(json.dumps(config))
    capsys.readouterr()
    assert main(["import", str(out), str(tmp_path / "native")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dspark import: error:") and "sample_from_anchor" in err and "Traceback" not in err


def test_export_without_a_needed_target_exits_2_and_says_what_to_pass(tmp_path, capsys):
    assert main(["export", str(make_native(tmp_path, "tiny")), str(tmp_path / "out"), "--layout", "speculators"]) == 2
    assert "--target" in capsys.readouterr().err


def test_export_refuses_to_overwrite_unless_forced(tmp_path, capsys):
    src, out = make_native(tmp_path, "tiny"), tmp_path / "out"
    assert main(["export", str(src), str(out), "--layout", "specforge", "--json"]) == 0
    assert main(["export", str(src), str(out), "--layout", "specforge"]) == 2
    assert main(["export", str(src), str(out), "--layout", "specforge", "--force", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["layout"] == "specforge"


def test_import_of_a_folder_without_a_config_exits_2(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["import", str(tmp_path / "empty"), str(tmp_path / "out")]) == 2
    assert "config.json is missing" in capsys.readouterr().err
