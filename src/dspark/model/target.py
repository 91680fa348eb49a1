"""Wraps any Hugging Face causal LM as a DSpark target: logits plus the features of the chosen layers.

Layer ids follow the HF convention (id i = output of decoder layer i = `hidden_states[i + 1]`; id −1 = the embedding
output, the first layer's input); the final layer is never used because HF stores it after the final norm. Forward
hooks on the chosen decoder layers and on the final norm capture exactly those tensors, so a forward keeps m + 1
hidden states rather than every layer's (`output_hidden_states`: 62 of them on a 61-layer target). The caller owns
the KV cache (the engine's backends). It does not sample or decide acceptance.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from torch import nn

from dspark.config import DraftConfig


class TargetMismatchError(ValueError):
    """The target and the draft (or the requested layers) cannot work together."""


@dataclass(frozen=True)
class TargetOutput:
    logits: torch.Tensor  # [B, T, V] (fp32; [B, k, V] with logits_to_keep=k)
    features: torch.Tensor  # [B, T, m·d] the chosen layers, concatenated in id order
    last_hidden: torch.Tensor  # [B, T, d] final post-norm hidden (the lm_head input)


class Target:
    """A frozen HF causal LM that reports the features a DSpark draft needs."""

    def __init__(self, model: nn.Module, layer_ids: Sequence[int]):
        self.model = model.eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        cfg = model.config
        self.num_layers = int(cfg.num_hidden_layers)
        self.hidden_size = int(cfg.hidden_size)
        self.layer_ids = tuple(int(i) for i in layer_ids)
        ids = self.layer_ids
        if not ids:
            raise TargetMismatchError("layer_ids is empty: name the target layers whose outputs the draft reads")
        if any(b <= a for a, b in zip(ids, ids[1:])):
            raise TargetMismatchError(f"layer_ids must strictly increase, got {list(ids)}")
        for i in ids:
            if i == self.num_layers - 1:
                raise TargetMismatchError(
                    f"layer id {i} is the target's last layer; HF stores it after the final norm, so it is never "
                    f"used as a feature. Pick ids in [-1, {self.num_layers - 2}]")
            if not -1 <= i < self.num_layers - 1:
                raise TargetMismatchError(
                    f"layer id {i} is out of range for a {self.num_layers}-layer target; use ids in "
                    f"[-1, {self.num_layers - 2}] (HF convention: id i is the output of decoder layer i)")
        self.layers, self.norm = decoder_parts(model)

    @classmethod
    def from_pretrained(cls, path: str | Path, layer_ids: Sequence[int], dtype: torch.dtype = torch.float32,
                        device: str | torch.device = "cpu") -> "Target":
        """Load a local HF checkpoint folder (no hub access) and wrap it."""
        from transformers import AutoModelForCausalLM

        path = Path(path)
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"{path} is not a Hugging Face model folder (no config.json)")
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=True).to(device)
        return cls(model, layer_ids)

    # --- shared modules --------------------------------------------------------------------------------------
    @property
    def embed_tokens(self) -> nn.Embedding:
        return self.model.get_input_embeddings()

    @property
    def lm_head(self) -> nn.Module:
        return self.model.get_output_embeddings()

    @property
    def vocab_size(self) -> int:
        return int(self.lm_head.weight.shape[0])

    @property
    def device(self) -> torch.device:
        return self.lm_head.weight.device

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        """The ids that end a generation: the model's generation config's `eos_token_id` (an int or a list), else its
        config's, as HF `generate` reads them; () when neither names one."""
        for source in (getattr(self.model, "generation_config", None), self.model.config):
            eos = getattr(source, "eos_token_id", None) if source is not None else None
            if eos is not None:
                return tuple(int(t) for t in (eos if isinstance(eos, (list, tuple)) else [eos]))
        return ()

    def check_draft(self, config: DraftConfig) -> None:
        """Raise a clear error if a draft with this config cannot serve this target."""
        if config.hidden_size != self.hidden_size:
            raise TargetMismatchError(
                f"draft hidden size {config.hidden_size} != target hidden size {self.hidden_size}: the draft was "
                f"built for another target")
        if config.vocab_size != self.vocab_size:
            raise TargetMismatchError(
                f"draft vocab {config.vocab_size} != target vocab {self.vocab_size}: the draft was built for another "
                f"tokenizer")
        if not 0 <= config.mask_token_id < self.vocab_size:
            raise TargetMismatchError(
                f"mask_token_id {config.mask_token_id} is outside the target vocabulary [0, {self.vocab_size})")
        if tuple(config.target_layer_ids) != self.layer_ids:
            raise TargetMismatchError(
                f"the draft reads target layers {list(config.target_layer_ids)} but this Target captures "
                f"{list(self.layer_ids)}; build the Target with the draft's target_layer_ids")
        if config.num_target_layers != self.num_layers:
            raise TargetMismatchError(
                f"the draft was trained on a {config.num_target_layers}-layer target, this one has {self.num_layers}")

    # --- forward -----------------------------------------------------------------------------------------------
    @torch.inference_mode()
    def forward(self, input_ids: torch.Tensor, cache=None, logits_to_keep: int = 0) -> TargetOutput:
        """Run tokens [B, T] after whatever `cache` (an HF `Cache`, grown in place; None: no cache, positions from 0)
        holds; returns logits and features for them. `logits_to_keep` k > 0: logits for the last k positions only
        (training reads features, not logits)."""
        keep = {"logits_to_keep": logits_to_keep} if logits_to_keep else {}  # HF's default: all positions
        captured: dict[int, torch.Tensor] = {}  # layer id -> [B, T, d]; len(layers) is the final norm's output
        hooks = [self.norm.register_forward_hook(_keep_output(captured, len(self.layers)))]
        for i in self.layer_ids:  # id −1: the first layer's input (the embedding output)
            layer = self.layers[max(i, 0)]
            hooks.append(layer.register_forward_pre_hook(_keep_input(captured, i), with_kwargs=True) if i < 0
                         else layer.register_forward_hook(_keep_output(captured, i)))
        try:
            out = self.model(input_ids=input_ids, past_key_values=cache, use_cache=cache is not None, **keep)
        finally:
            for hook in hooks:
                hook.remove()
        features = torch.cat([captured[i] for i in self.layer_ids], dim=-1)  # [B, T, m·d]
        return TargetOutput(logits=out.logits.float(), features=features, last_hidden=captured[len(self.layers)])


def decoder_parts(model: nn.Module) -> tuple[nn.ModuleList, nn.Module]:
    """The decoder layer list and the final norm of an HF causal LM (Llama / Qwen / Mistral / DeepSeek: `layers`,
    `norm`; GPT-2 style: `h`, `ln_f`)."""
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else getattr(model, "model", model)
    layers = next((getattr(decoder, n) for n in ("layers", "h", "blocks") if hasattr(decoder, n)), None)
    norm = next((getattr(decoder, n) for n in ("norm", "ln_f", "final_layernorm") if hasattr(decoder, n)), None)
    if not isinstance(layers, nn.ModuleList) or norm is None:
        raise TargetMismatchError(
            f"cannot find the decoder layers and final norm of {type(model).__name__} (looked for `layers` / `h` / "
            f"`blocks` and `norm` / `ln_f` / `final_layernorm` on {type(decoder).__name__}); dspark reads a target's "
            f"features with hooks on them")
    return layers, norm


def _keep_output(captured: dict[int, torch.Tensor], key: int):
    def hook(module: nn.Module, args: tuple, output) -> None:
        captured[key] = output[0] if isinstance(output, tuple) else output
    return hook


def _keep_input(captured: dict[int, torch.Tensor], key: int):
    def hook(module: nn.Module, args: tuple, kwargs: dict) -> None:
        captured[key] = args[0] if args else kwargs["hidden_states"]
    return hook
