"""Load what a benchmark run needs from local folders: the HF target, the DSpark draft and the target's tokenizer.

No hub access (local files only). The target captures exactly the layers the draft reads. Errors say which folder is
wrong and what to pass instead. It runs nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dspark.bench.errors import BenchError

DTYPES = ("auto", "float32", "bfloat16", "float16")


@dataclass(frozen=True)
class BenchModels:
    target: Any  # dspark.model.target.Target
    draft: Any  # dspark.model.draft.DSparkDraft
    tokenizer: Any
    device: str
    eos_token_ids: tuple[int, ...]
    max_positions: int  # the most positions both target and draft support

    @property
    def drafts_per_round(self) -> int:
        return int(self.draft.config.num_draft_tokens)


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise BenchError(f"--device {device}: no CUDA device is available here; use --device cpu")
    return device


def resolve_dtype(name: str, device: str) -> Any:
    import torch

    if name not in DTYPES:
        raise BenchError(f"--dtype must be one of {DTYPES}, got {name!r}")
    if name == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    return getattr(torch, name)


def load_tokenizer(path: str | Path) -> Any:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError, TypeError) as err:
        raise BenchError(f"no usable tokenizer in {path} ({str(err).splitlines()[0][:160]}); pass the folder that "
                         f"holds the target's tokenizer with --tokenizer PATH") from None


def eos_token_ids(tokenizer: Any, model: Any) -> tuple[int, ...]:
    ids: set[int] = set()
    for value in (getattr(tokenizer, "eos_token_id", None),
                  getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    return tuple(sorted(ids))


def load_models(target_path: str | Path, draft_path: str | Path, tokenizer_path: str | Path | None = None,
                device: str = "auto", dtype: str = "auto", draft_vocab: int = 0) -> BenchModels:
    """Target + draft + tokenizer on one device; `draft_vocab` K > 0: the draft scores only the K tokens of the counts
    beside it (FR-Spec, `dspark train token-counts`)."""
    from dspark.formats.native import load_draft
    from dspark.engine.cpu_layout import plan_cpu_layout
    from dspark.model.target import Target

    device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, device)
    target_path, draft_path = Path(target_path), Path(draft_path)
    if not (target_path / "config.json").is_file():
        raise BenchError(f"--target {target_path} is not a Hugging Face model folder (no config.json)")
    if not (draft_path / "config.json").is_file():
        raise BenchError(f"--draft {draft_path} is not a draft folder (no config.json); pass a native draft "
                         f"folder, or convert a DeepSpec / SpecForge / speculators one with `dspark import`")
    tokenizer = load_tokenizer(tokenizer_path or target_path)
    draft = load_draft(draft_path, device=device, dtype=torch_dtype)
    target = Target.from_pretrained(target_path, draft.config.target_layer_ids, dtype=torch_dtype, device=device)
    target.check_draft(draft.config)
    if draft_vocab:
        from dspark.engine.batch import prepare_pair
        from dspark.formats.token_counts import restrict_by_counts

        prepare_pair(target, draft)  # the target's LM head, whose rows the draft vocabulary takes
        restrict_by_counts(draft, draft_path, draft_vocab)
    plan_cpu_layout(target.model, draft)  # CPU only: faster few-row GEMMs (engine/cpu_layout.py)
    limits = [int(draft.config.max_position_embeddings)]
    target_limit = getattr(target.model.config, "max_position_embeddings", None)
    if target_limit:
        limits.append(int(target_limit))
    return BenchModels(target, draft, tokenizer, device, eos_token_ids(tokenizer, target.model), min(limits))
