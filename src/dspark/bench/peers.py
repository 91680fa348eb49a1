"""The peers our engine is measured against, as runner `Method`s on the same target weights.

- hf-dynamic: transformers `generate` with its default dynamic cache;
- hf-static: `generate` with `cache_implementation="static"` (transformers compiles the decode step itself on CUDA;
  `max_cache_len` is fixed for the whole run so later calls reuse the compiled graph);
- prompt-lookup: `generate` with `prompt_lookup_num_tokens` (n-gram drafts from the prompt; batch 1, greedy);
- assisted: `generate` with `assistant_model=` a small autoregressive model sharing the tokenizer (batch 1, greedy);
- dflash-ref: z-lab's `dflash_generate` (PyPI `dflash` 0.1.0) running our DFlash-mode draft exported with
  `dspark export --layout dflash` (batch 1).
A batch of C requests is left-padded with an attention mask. Outputs are cut after the first EOS (finished rows of
a batch keep producing padding, which is not counted). Peers stop themselves at the time left (`max_time`), except
dflash, which has no such option. Loading models is the caller's job.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import torch

from dspark.bench.throughput import Method, Output, never_run

PROMPT_LOOKUP_TOKENS = 10  # drafts per round, transformers' documented example value
DFLASH_INSTALL = "pip install --no-deps dflash==0.1.0"


def _cut(tokens: list[int], eos: set[int]) -> tuple[int, ...]:
    stop = next((i for i, t in enumerate(tokens) if t in eos), None)
    return tuple(tokens if stop is None else tokens[: stop + 1])


def left_padded(prompts: Sequence[Sequence[int]], pad_id: int, device: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids [C, P], attention_mask [C, P]): each prompt right-aligned after `pad_id`s, mask 0 on padding."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)  # [C, P]
    mask = torch.zeros((len(prompts), width), dtype=torch.long)  # [C, P]
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt):] = torch.tensor(list(prompt), dtype=torch.long)
        mask[row, width - len(prompt):] = 1
    return ids.to(device), mask.to(device)


class HFGenerate:
    """transformers `generate` with fixed extra options (cache kind, prompt lookup, assistant)."""

    def __init__(self, model: Any, eos_ids: Sequence[int], pad_id: int, temperature: float = 0.0,
                 assistant: Any = None, **options: Any):
        self.model, self.eos, self.pad_id, self.temperature = model, tuple(eos_ids), pad_id, temperature
        self.assistant, self.options = assistant, options

    def __call__(self, prompts: list[list[int]], concurrency: int, max_new_tokens: int,
                 seconds_left: float | None) -> list[Output]:
        from transformers import GenerationConfig

        sampling = self.temperature > 0
        config = GenerationConfig(
            max_new_tokens=max_new_tokens, do_sample=sampling, pad_token_id=self.pad_id,
            eos_token_id=list(self.eos) or None, max_time=seconds_left,
            **(dict(temperature=self.temperature, top_k=0, top_p=1.0) if sampling else {}), **self.options)
        ids, mask = left_padded(prompts, self.pad_id, self.model.device)
        extra = {"assistant_model": self.assistant} if self.assistant is not None else {}
        with torch.inference_mode():
            out = self.model.generate(input_ids=ids, attention_mask=mask, generation_config=config, **extra)
        return [Output(_cut(row.tolist(), set(self.eos))) for row in out[:, ids.shape[1]:]]


def hf_methods(model: Any, eos_ids: Sequence[int], pad_id: int, temperature: float, max_cache_len: int,
               assistant: Any = None, assistant_note: str = "") -> list[Method]:
    """hf-dynamic, hf-static, prompt-lookup and assisted (n/a with `assistant_note` when no assistant is given)."""
    greedy_only = "" if temperature == 0 else "greedy only in this benchmark (assisted decoding needs do_sample=False)"
    methods = [
        Method("hf-dynamic", HFGenerate(model, eos_ids, pad_id, temperature)),
        Method("hf-static", HFGenerate(model, eos_ids, pad_id, temperature, cache_implementation="static",
                                       max_cache_len=max_cache_len)),
        Method("prompt-lookup", HFGenerate(model, eos_ids, pad_id, temperature,
                                           prompt_lookup_num_tokens=PROMPT_LOOKUP_TOKENS),
               batch1_only=True, unavailable=greedy_only),
    ]
    run = HFGenerate(model, eos_ids, pad_id, temperature, assistant=assistant) if assistant is not None else None
    methods.append(Method("assisted", run or never_run, batch1_only=True,
                          unavailable=greedy_only or ("" if assistant is not None else assistant_note)))
    return methods


def dflash_available() -> str:
    """"" when the `dflash` package imports, else why not (with the install command)."""
    try:
        import dflash.model  # noqa: F401
    except ImportError as err:
        return f"the dflash package is not importable ({err}); {DFLASH_INSTALL}"
    return ""


class DFlashReference:
    """z-lab's `dflash_generate` on an exported DFlash-layout draft, one request at a time."""

    def __init__(self, target_model: Any, export_dir: Path, eos_ids: Sequence[int], temperature: float,
                 dtype: torch.dtype):
        from dflash.model import DFlashDraftModel

        self.target, self.eos, self.temperature = target_model, tuple(eos_ids), temperature
        self.draft = DFlashDraftModel.from_pretrained(str(export_dir), dtype=dtype).to(target_model.device).eval()

    def __call__(self, prompts: list[list[int]], concurrency: int, max_new_tokens: int,
                 seconds_left: float | None) -> list[Output]:
        from dflash.model import dflash_generate

        stats = self.target.device.type == "cuda"  # its timing stats call torch.cuda.synchronize
        results = []
        for prompt in prompts:
            ids = torch.tensor([prompt], dtype=torch.long, device=self.target.device)  # [1, P]
            out = dflash_generate(self.draft, self.target, ids, max_new_tokens, list(self.eos) or None,
                                  self.temperature, return_stats=stats)
            output_ids = out.output_ids if stats else out
            taus = tuple(int(t) for t in out.acceptance_lengths) if stats else ()
            results.append(Output(tuple(output_ids[0, len(prompt):].tolist()), taus))
        return results


def dflash_method(target_model: Any, dflash_draft: str | Path | None, work: Path, eos_ids: Sequence[int],
                  temperature: float, dtype: torch.dtype) -> Method:
    """dflash-ref on `dflash_draft` (a native DFlash-mode draft folder), exported into `work`; n/a with the reason
    when there is no such draft or no dflash package."""
    reason = "no DFlash-mode draft given (--dflash-draft)" if dflash_draft is None else dflash_available()
    if reason:
        return Method("dflash-ref", never_run, batch1_only=True, unavailable=reason)
    from dspark.formats.checkpoint import ConvertOptions
    from dspark.formats.convert import export_draft

    export = work / "dflash-export"
    export_draft(dflash_draft, export, "dflash", ConvertOptions(), overwrite=True)
    return Method("dflash-ref", DFlashReference(target_model, export, eos_ids, temperature, dtype), batch1_only=True)
