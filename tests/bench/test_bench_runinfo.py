"""Run records: commit from the source checkout (or "unknown" elsewhere), device name, versions."""
from __future__ import annotations

import re

from dspark.bench import runinfo


def test_commit_is_a_hash_in_a_checkout_and_unknown_elsewhere(monkeypatch, tmp_path):
    commit, dirty = runinfo.git_commit()
    assert commit == "unknown" or re.fullmatch(r"[0-9a-f]{40}", commit)
    monkeypatch.setattr(runinfo, "_CHECKOUT", tmp_path)  # not a dspark source checkout
    assert runinfo.git_commit() == ("unknown", None)


def test_run_info_names_device_versions_command_and_time():
    info = runinfo.collect_run_info("dspark bench acceptance --suite code", "cpu")
    assert info.device.startswith("cpu (") and info.device.endswith("threads)")
    assert info.command == "dspark bench acceptance --suite code"
    assert info.torch != "unknown" and info.transformers != "unknown" and info.python
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", info.created)
