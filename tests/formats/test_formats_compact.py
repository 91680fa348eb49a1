"""Compact int8 storage: smaller files, weights within half a quantization step, read back as ordinary checkpoints."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from dspark.cli import main
from dspark.formats.compact import SCALE_SUFFIX, compact_tensors, read_weight_file
from dspark.formats.native import CheckpointError, load_draft, save_draft
from formats_support import TARGET_DIR, make_native


def test_int8_storage_is_smaller_and_every_weight_is_within_half_a_step_of_its_row(tmp_path):
    src = make_native(tmp_path, "tiny", dtype=torch.bfloat16)
    draft = load_draft(src, dtype=torch.bfloat16)
    small = save_draft(draft, tmp_path / "int8", int8=True)
    assert (small / "model.safetensors").stat().st_size < 0.6 * (src / "model.safetensors").stat().st_size
    stored = load_file(str(small / "model.safetensors"))
    assert any(t.dtype == torch.int8 for t in stored.values())
    back = load_draft(small, dtype=torch.float32)
    for name, original in draft.state_dict().items():
        if name not in back.state_dict() or not original.is_floating_point():
            continue
        got, want = back.state_dict()[name], original.float()
        if want.dim() == 2:  # half a step of the row's scale (largest magnitude / 127), plus bf16 rounding
            step = want.abs().amax(dim=1, keepdim=True) / 127
            assert ((got - want).abs() <= step / 2 + want.abs() / 128 + 1e-12).all(), name
        else:  # norms and other vectors are stored as they are
            assert torch.equal(got, want), name


def test_int8_file_reads_back_in_the_original_dtype_with_no_scale_tensors(tmp_path):
    tensors = {"a.weight": torch.randn(8, 5, dtype=torch.bfloat16), "norm.weight": torch.ones(5, dtype=torch.bfloat16)}
    stored, metadata = compact_tensors(tensors)
    assert set(stored) == {"a.weight", "a.weight" + SCALE_SUFFIX, "norm.weight"}
    save_file(stored, str(tmp_path / "w.safetensors"), metadata=metadata)
    back = read_weight_file(tmp_path / "w.safetensors")
    assert set(back) == set(tensors) and {t.dtype for t in back.values()} == {torch.bfloat16}
    assert torch.equal(back["norm.weight"], tensors["norm.weight"])


def test_an_int8_matrix_without_its_scale_is_refused_naming_it(tmp_path):
    stored, metadata = compact_tensors({"a.weight": torch.randn(4, 3)})
    del stored["a.weight" + SCALE_SUFFIX]
    save_file(stored, str(tmp_path / "w.safetensors"), metadata=metadata)
    with pytest.raises(CheckpointError, match="'a.weight' needs a float scale"):
        read_weight_file(tmp_path / "w.safetensors")


def test_export_int8_to_native_then_deepspec_gives_ordinary_bf16_weights(tmp_path, capsys):
    src = make_native(tmp_path, "tiny", dtype=torch.bfloat16)
    assert main(["export", str(src), str(tmp_path / "small"), "--layout", "native", "--int8"]) == 0
    assert main(["export", str(tmp_path / "small"), str(tmp_path / "ds"), "--layout", "deepspec",
                 "--target", str(TARGET_DIR)]) == 0
    exported = load_file(str(tmp_path / "ds" / "model.safetensors"))
    assert not any(name.endswith(SCALE_SUFFIX) for name in exported)
    own = {name: t for name, t in exported.items() if name not in ("embed_tokens.weight", "lm_head.weight")}
    assert {t.dtype for t in own.values()} == {torch.bfloat16}  # (the target's copies keep the target's dtype)
    assert json.loads((tmp_path / "ds" / "config.json").read_text())["architectures"] == ["Qwen3DSparkModel"]


def test_int8_export_to_an_engine_layout_exits_2_and_says_to_use_native(tmp_path, capsys):
    src = make_native(tmp_path, "tiny")
    capsys.readouterr()
    assert main(["export", str(src), str(tmp_path / "ds"), "--layout", "deepspec", "--target", str(TARGET_DIR),
                 "--int8"]) == 2
    err = capsys.readouterr().err
    assert "--layout native" in err and "Traceback" not in err
