"""Build the testbed target folder (corpus → tokenizer → Qwen3 → train → evaluate → save) and cache it.

A target folder is a normal Hugging Face model folder (config.json, model.safetensors, generation_config.json,
tokenizer files) plus `testbed.json`, the card: recipe, corpus files and split, tokenizer ids (EOS, mask),
training losses and wall time, held-out loss / perplexity / top-1, greedy samples and library versions.

`build_target()` keys its cache folder by the recipe, a fingerprint of the standard-library files and the Python
version, builds at most once (a file lock serialises concurrent builders) and always writes atomically: the
folder is assembled under a temporary name and renamed into place, and the card is written last. The cache
lives in `cache_dir`, else `$DSPARK_CACHE/testbed`, else `~/.cache/dspark/testbed`.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from dspark.testbed.card import CARD_NAME, TestbedError, is_built, read_card  # noqa: F401 (re-exported)
from dspark.testbed.corpus import fingerprint, heldout_documents, source_fingerprint, stdlib_root, train_documents
from dspark.testbed.recipe import TargetRecipe

CACHE_ENV = "DSPARK_CACHE"
SAMPLE_PROMPT_TOKENS = 48
SAMPLE_NEW_TOKENS = 32
NUM_SAMPLES = 3


def default_cache_dir() -> Path:
    """Where built targets are cached: `$DSPARK_CACHE/testbed`, else `~/.cache/dspark/testbed`."""
    root = os.environ.get(CACHE_ENV)
    return (Path(root).expanduser() if root else Path.home() / ".cache" / "dspark") / "testbed"


def target_key(recipe: TargetRecipe) -> str:
    """16 hex digits naming the cached folder: recipe, stdlib source fingerprint, Python major.minor."""
    parts = (recipe.digest(), source_fingerprint(recipe.corpus), f"py{sys.version_info[0]}.{sys.version_info[1]}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def target_path(cache_dir: str | Path | None = None, recipe: TargetRecipe | None = None) -> Path:
    """The folder `build_target` uses for this recipe (it may not exist yet)."""
    recipe = recipe or TargetRecipe()
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    return root / f"target-{target_key(recipe)}"


def load_target(path: str | Path):
    """(model, tokenizer) of a built target folder: fp32, eval mode, CPU."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    read_card(path)  # clear error if it is not a target folder
    with _hf_bars_off():
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32, local_files_only=True)
    return model.eval(), AutoTokenizer.from_pretrained(str(path))


@contextlib.contextmanager
def _hf_bars_off():
    """Silence transformers' own progress bars (shard writing / weight loading) for the duration."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def _lock(path: Path):
    """An exclusive advisory lock on `path` (POSIX); a no-op where fcntl is missing."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_target(cache_dir: str | Path | None = None, recipe: TargetRecipe | None = None,
                 on_step: Callable | None = None, on_stage: Callable[[str], None] | None = None,
                 threads: int | None = None) -> Path:
    """The cached target folder for `recipe` (default: `TargetRecipe()`), built on first use only."""
    recipe = recipe or TargetRecipe()
    path = target_path(cache_dir, recipe)
    if is_built(path):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with _lock(path.parent / f".{path.name}.lock"):
        if not is_built(path):  # another process may have finished while we waited
            write_target(path, recipe, on_step, on_stage, threads)
    return path


def write_target(out: str | Path, recipe: TargetRecipe | None = None, on_step: Callable | None = None,
                 on_stage: Callable[[str], None] | None = None, threads: int | None = None) -> Path:
    """Train a target from scratch into the new folder `out` (atomically: built aside, then renamed)."""
    recipe = recipe or TargetRecipe()
    out = Path(out).expanduser()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise TestbedError(f"{out} already exists and is not an empty folder; remove it or choose another --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        _assemble(tmp, recipe, on_step, on_stage or (lambda _: None), threads)
        if out.exists():
            out.rmdir()  # empty (checked above)
        os.rename(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _greedy_samples(model, tokenizer, documents) -> list[dict[str, str]]:
    """Greedy continuations of prompts from the middle of the first held-out files (not their import lines),
    next to the real text (for the card)."""
    import torch

    from dspark.testbed.examples import make_examples

    windows = make_examples(tokenizer, documents, SAMPLE_PROMPT_TOKENS, SAMPLE_NEW_TOKENS, per_file=2)
    examples = [ex for ex in windows if ex.start > 0][:NUM_SAMPLES] or windows[:NUM_SAMPLES]
    samples = []
    with torch.no_grad():
        for ex in examples:
            prompt = torch.tensor([ex.prompt_ids])
            out = model.generate(prompt, max_new_tokens=SAMPLE_NEW_TOKENS, do_sample=False, eos_token_id=None,
                                 pad_token_id=tokenizer.eos_token_id)
            samples.append({"path": ex.path, "prompt": ex.prompt,
                            "greedy": tokenizer.decode(out[0, prompt.shape[1]:].tolist()),
                            "reference": ex.continuation})
    return samples


def _assemble(folder: Path, recipe: TargetRecipe, on_step, stage: Callable[[str], None],
              threads: int | None) -> None:
    import torch

    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        _train_and_save(folder, recipe, on_step, stage)
    finally:
        torch.set_num_threads(previous)


def _train_and_save(folder: Path, recipe: TargetRecipe, on_step, stage: Callable[[str], None]) -> None:
    import tokenizers
    import torch
    import transformers
    from transformers import Qwen3ForCausalLM

    from dspark.formats.native import write_json
    from dspark.testbed.recipe import qwen3_config
    from dspark.testbed.target_train import evaluate, pack, spread_rows, train
    from dspark.testbed.tokenizer import encode_documents, train_tokenizer

    began = time.perf_counter()
    stage("reading the standard library")
    train_docs, heldout_docs = train_documents(recipe.corpus), heldout_documents(recipe.corpus)
    stage(f"training the tokenizer on {len(train_docs)} files")
    tokenizer = train_tokenizer([d.text for d in train_docs], recipe.vocab_size, max_length=recipe.context)
    eos = tokenizer.eos_token_id
    rows = pack(encode_documents(tokenizer, [d.text for d in train_docs]), recipe.seq_len, eos)
    heldout_rows = pack(encode_documents(tokenizer, [d.text for d in heldout_docs]), recipe.seq_len, eos)
    eval_rows = spread_rows(heldout_rows, recipe.eval_sequences)
    prep_seconds = time.perf_counter() - began

    stage(f"training the target: {recipe.steps} steps on {rows.numel():,} tokens")
    torch.manual_seed(recipe.seed)
    model = Qwen3ForCausalLM(qwen3_config(recipe, len(tokenizer), eos))
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = eos
    result = train(model, rows, recipe, on_step)

    stage("evaluating on held-out files")
    heldout = evaluate(model, eval_rows)
    samples = _greedy_samples(model, tokenizer, heldout_docs)

    stage("saving")
    with _hf_bars_off():
        model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    n_bytes = sum(len(d.text.encode()) for d in heldout_docs)
    card = {
        "kind": "dspark-testbed-target",
        "key": target_key(recipe),
        "recipe": recipe.to_dict(),
        "corpus": {
            "source": "Python standard library", "stdlib_root": str(stdlib_root()),
            "python": sys.version.split()[0], "fingerprint": fingerprint(train_docs + heldout_docs),
            "train_files": [d.path for d in train_docs], "heldout_files": [d.path for d in heldout_docs],
            "train_tokens": int(rows.numel()), "heldout_tokens": int(heldout_rows.numel()),
            "heldout_bytes_per_token": round(n_bytes / max(1, heldout_rows.numel()), 4),
        },
        "tokenizer": {"type": "byte-level BPE (tokenizers)", "vocab_size": len(tokenizer),
                      "eos_token_id": eos, "pad_token_id": tokenizer.pad_token_id,
                      "mask_token_id": tokenizer.mask_token_id},
        "model": {"architecture": "Qwen3ForCausalLM", "parameters": sum(p.numel() for p in model.parameters()),
                  "dtype": "float32"},
        "training": {"steps": recipe.steps, "tokens": result.tokens, "seconds": round(result.seconds, 2),
                     "prep_seconds": round(prep_seconds, 2),
                     "tokens_per_second": round(result.tokens / max(result.seconds, 1e-9), 1),
                     "threads": torch.get_num_threads(), "losses": list(result.losses)},
        "heldout": {"loss": heldout.loss, "perplexity": heldout.perplexity, "top1": heldout.top1,
                    "tokens": heldout.tokens, "sequences": int(eval_rows.shape[0])},
        "samples": samples,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "tokenizers": tokenizers.__version__},
        "seconds": round(time.perf_counter() - began, 2),
    }
    write_json(folder / CARD_NAME, card)  # last: its presence marks the folder complete
