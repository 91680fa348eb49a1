"""What the server serves: one target (HF model + its tokenizer) and an optional DSpark draft, checked at startup.

`served_model(hf_model, tokenizer, draft, name)` bundles parts that are already loaded (tests);
`load_served_model(target_path, draft_path)` loads local folders (no hub access), or, given neither, the pair its
`default` loader returns (the command line passes the embedded default, `dspark.cli.serve_default.load_default`).
Pair mismatches (hidden size, vocabulary, layer ids) fail here, once, with the checker's message, instead of on the
first request. Nothing here generates or serves HTTP.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from dspark.engine.cpu_layout import plan_cpu_layout
from dspark.model.draft import DSparkDraft
from dspark.model.target import Target


class ServeSetupError(ValueError):
    """The server cannot start with these models or settings; the message says what to change."""


@dataclass(frozen=True)
class ServedModel:
    name: str
    hf_model: nn.Module
    tokenizer: Any
    draft: DSparkDraft | None
    layer_ids: tuple[int, ...]  # target layers the draft reads (the embedding output (-1) without a draft)
    context_length: int  # prompt + completion tokens one request may span
    eos_token_ids: tuple[int, ...]
    vocab_size: int
    created: int

    @property
    def num_spec_tokens(self) -> int:
        """Drafts verified per round at most (vLLM's `num_speculative_tokens`); 0 without a draft."""
        return 0 if self.draft is None else self.draft.config.num_draft_tokens

    def limited(self, max_model_len: int | None) -> "ServedModel":
        """This model with requests held to `max_model_len` tokens (None, or more than its context: unchanged)."""
        if max_model_len is None or max_model_len >= self.context_length:
            return self
        return replace(self, context_length=max_model_len)

    def new_target(self) -> Target:
        """A Target over the shared HF model with its own KV cache (one per concurrent sequence)."""
        return Target(self.hf_model, self.layer_ids)


def _target_positions(hf_model: nn.Module) -> int | None:
    cfg = hf_model.config
    for key in ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length"):
        value = getattr(cfg, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _eos_ids(hf_model: nn.Module, tokenizer: Any) -> tuple[int, ...]:
    ids: list[int] = []
    generation = getattr(hf_model, "generation_config", None)
    for value in (getattr(tokenizer, "eos_token_id", None), getattr(generation, "eos_token_id", None)):
        for token in (value if isinstance(value, (list, tuple)) else [value]):
            if isinstance(token, int) and token not in ids:
                ids.append(token)
    return tuple(ids)


def served_model(hf_model: nn.Module, tokenizer: Any, draft: DSparkDraft | None, name: str) -> ServedModel:
    """Check the pair, tie the draft to the target's embedding / LM head, and work out the serving limits."""
    if not name:
        raise ServeSetupError("the served model name is empty; pass --served-model-name")
    hf_model.eval()
    plan_cpu_layout(hf_model, draft)  # CPU only: faster few-row GEMMs (engine/cpu_layout.py)
    layer_ids: tuple[int, ...] = (-1,)
    limits = [p for p in (_target_positions(hf_model),) if p]
    if draft is not None:
        layer_ids = tuple(draft.config.target_layer_ids)
        target = Target(hf_model, layer_ids)
        target.check_draft(draft.config)
        if draft.embed_tokens is None:
            draft.tie_embeddings(target.embed_tokens, target.lm_head)
        draft.eval()
        # the engine needs prompt + max_new_tokens + γ within the draft's positions
        limits.append(draft.config.max_position_embeddings - draft.config.num_draft_tokens)
    vocab = int(hf_model.get_output_embeddings().weight.shape[0])
    if len(tokenizer) > vocab:
        raise ServeSetupError(f"the tokenizer has {len(tokenizer)} tokens but the target's LM head only {vocab}: "
                              f"they do not belong together")
    context = min(limits) if limits else 4096
    if context < 2:
        raise ServeSetupError(f"a context of {context} tokens leaves no room to generate")
    return ServedModel(name=name, hf_model=hf_model, tokenizer=tokenizer, draft=draft, layer_ids=layer_ids,
                       context_length=context, eos_token_ids=_eos_ids(hf_model, tokenizer), vocab_size=vocab,
                       created=int(time.time()))


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

# loads a default pair: (served name, hf_model, tokenizer, draft, draft folder)
DefaultLoader = Callable[[], tuple[str, nn.Module, Any, DSparkDraft, Path]]


def load_served_model(target_path: str | None = None, draft_path: str | None = None, name: str | None = None,
                      device: str = "cpu", dtype: str = "float32", draft_vocab: int = 0,
                      default: DefaultLoader | None = None) -> ServedModel:
    """Load `--target PATH [--draft PATH]` (tokenizer from the target folder), or, given neither, what `default()`
    loads (after the options are checked); `draft_vocab` K > 0: the draft scores only the K tokens of the counts
    beside it (FR-Spec, `dspark train token-counts`)."""
    if dtype not in DTYPES:
        raise ServeSetupError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    if draft_vocab < 0:
        raise ServeSetupError(f"--draft-vocab {draft_vocab}: pass 0 for the whole vocabulary or a token count")
    if target_path is None:
        if draft_path is not None:
            raise ServeSetupError("--draft needs --target: a draft is built for one target model")
        if default is None:
            raise ServeSetupError("no model to serve: pass --target (and --draft)")
        default_name, hf_model, tokenizer, draft, draft_folder = default()
        hf_model.to(device=device, dtype=DTYPES[dtype])
        draft.to(device=device, dtype=DTYPES[dtype])
        served = served_model(hf_model, tokenizer, draft, name or default_name)
        return _restricted(served, draft_folder, draft_vocab)
    folder = Path(target_path)
    if not (folder / "config.json").is_file():
        raise ServeSetupError(f"--target {target_path}: not a Hugging Face model folder (no config.json)")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ServeSetupError(f"--target {target_path}: cannot load its tokenizer ({exc}); the tokenizer files "
                              f"must sit in the target folder") from None
    hf_model = AutoModelForCausalLM.from_pretrained(folder, dtype=DTYPES[dtype], local_files_only=True).to(device)
    draft = None
    if draft_path is not None:
        from dspark.formats.native import load_draft

        draft = load_draft(draft_path, device=device, dtype=DTYPES[dtype])
    elif draft_vocab:
        raise ServeSetupError("--draft-vocab restricts the draft's vocabulary: give --draft too")
    served = served_model(hf_model, tokenizer, draft, name or folder.resolve().name)
    return _restricted(served, draft_path, draft_vocab)


def _restricted(served: ServedModel, draft_folder: str | Path | None, draft_vocab: int) -> ServedModel:
    """The served draft scoring only its K most frequent tokens (its LM head is tied by now); K = 0: unchanged."""
    if not draft_vocab or served.draft is None:
        return served
    from dspark.formats.token_counts import restrict_by_counts

    restrict_by_counts(served.draft, draft_folder, draft_vocab)
    return served
