"""Convert draft checkpoints between dspark's native folder and the layouts the production engines load.

`import_draft(src, out)` reads any supported layout (detected from config.json, never guessed) and writes a native
folder; `export_draft(src, out, layout)` reads any supported layout and writes the requested one. Tensors are
copied bit for bit (dtype and bytes kept) and checked against the config. Every layout's facts live in its own
module (`deepspec`, `specforge`, `speculators`, `dflash`); this module only detects, dispatches and writes.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dspark.config import DraftConfig
from dspark.formats import deepspec, dflash, specforge, speculators
from dspark.formats.checkpoint import (DEEPSPEC, DFLASH, LAYOUTS, NATIVE, SPECFORGE, SPECULATORS, ConvertOptions,
                                       DraftCheckpoint)
from dspark.formats.native import CONFIG_NAME, CheckpointError, atomic_write, config_from_dict, write_json
from dspark.formats.native_files import is_native, read_native, read_raw_config, write_native
from dspark.formats.target_files import check_target_fits, read_target
from dspark.formats.tensors import EMBEDDING_TENSORS, check_tensors, dtype_name, read_tensors, write_tensors

# Files beside the weights that travel unchanged (the confidence head's STS calibration, see native.load_draft).
AUXILIARY_FILES = ("calibration.json",)

_PARSERS = {DEEPSPEC: deepspec, SPECFORGE: specforge, SPECULATORS: speculators, DFLASH: dflash}


@dataclass(frozen=True)
class ConversionReport:
    source: str
    source_layout: str
    output: str
    layout: str
    mode: str
    block_size: int
    num_draft_tokens: int
    target_layer_ids: tuple[int, ...]
    mask_token_id: int
    tensors: int
    parameters: int
    dtype: str
    embeddings: bool

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "target_layer_ids": list(self.target_layer_ids)}


def detect_layout(raw: dict[str, Any], where: str = CONFIG_NAME) -> str:
    """Which layout a config.json is in; refuse rather than guess."""
    arch = list(raw.get("architectures") or [])
    if raw.get("speculators_model_type"):
        return SPECULATORS  # before architectures: speculators also writes DSparkDraftModel / DFlashDraftModel
    if is_native(raw):
        return NATIVE
    if "Qwen3DSparkModel" in arch:
        return DEEPSPEC
    if "DSparkDraftModel" in arch:
        return SPECFORGE
    if "DFlashDraftModel" in arch:
        return DFLASH
    raise CheckpointError(f"{where}: cannot tell the checkpoint layout from architectures {arch}; dspark reads "
                          f"Qwen3DSparkModel (DeepSpec), DSparkDraftModel (SpecForge), DFlashDraftModel (z-lab "
                          f"DFlash) and speculators configs (speculators_model_type)")


def _source_folder(src: str | Path) -> Path:
    folder = Path(src)
    return folder.parent if folder.name == CONFIG_NAME else folder


def _locate(src: str | Path) -> tuple[Path, dict[str, Any], str, str]:
    """(folder, config dict, where to point errors, layout) of a draft folder or its config.json."""
    folder = _source_folder(src)
    raw = read_raw_config(folder)
    where = str(folder / CONFIG_NAME)
    return folder, raw, where, detect_layout(raw, where)


def read_checkpoint(src: str | Path, options: ConvertOptions = ConvertOptions()) -> DraftCheckpoint:
    """Any supported draft folder as a DraftCheckpoint (config checked, tensors exactly as stored)."""
    folder, raw, where, layout = _locate(src)
    if layout == NATIVE:
        return read_native(folder, raw)
    module = _PARSERS[layout]
    config, extras = module.parse_config(raw, options, where)
    tensors = {k: v for k, v in read_tensors(folder).items() if k not in module.NOT_IMPORTED}
    check_tensors(config, tensors, where)
    return DraftCheckpoint(config, tensors, extras, layout)


def _checked(checkpoint: DraftCheckpoint, options: ConvertOptions) -> DraftCheckpoint:
    if options.target is not None:
        check_target_fits(checkpoint.config, read_target(options.target))
    return checkpoint


def read_draft_config(src: str | Path, options: ConvertOptions = ConvertOptions()) -> DraftConfig:
    """The DraftConfig of a draft folder (or config.json) in any supported layout, without reading its weights."""
    _, raw, where, layout = _locate(src)
    if layout == NATIVE:
        return config_from_dict(raw, where)
    return _PARSERS[layout].parse_config(raw, options, where)[0]


def _prepare(out: str | Path, overwrite: bool) -> Path:
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise CheckpointError(f"{folder} exists and is not a folder")
    if (folder / CONFIG_NAME).exists() and not overwrite:
        raise CheckpointError(f"{folder} already holds a checkpoint; choose an empty folder or pass --force")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _copy_auxiliary(src: str | Path, out: Path) -> None:
    for name in AUXILIARY_FILES:
        file = _source_folder(src) / name
        if file.is_file() and file.resolve() != (out / name).resolve():
            atomic_write(out / name, lambda tmp, data=file.read_bytes(): Path(tmp).write_bytes(data))


def _report(src: Path, checkpoint: DraftCheckpoint, out: Path, layout: str, tensors: dict) -> ConversionReport:
    config = checkpoint.config
    return ConversionReport(
        source=str(src), source_layout=checkpoint.layout, output=str(out), layout=layout, mode=config.mode,
        block_size=config.block_size, num_draft_tokens=config.num_draft_tokens,
        target_layer_ids=config.target_layer_ids, mask_token_id=config.mask_token_id, tensors=len(tensors),
        parameters=sum(t.numel() for name, t in tensors.items() if name not in EMBEDDING_TENSORS),
        dtype=dtype_name(tensors), embeddings=all(name in tensors for name in EMBEDDING_TENSORS))


def _without_embeddings(checkpoint: DraftCheckpoint) -> DraftCheckpoint:
    tensors = {k: v for k, v in checkpoint.tensors.items() if k not in EMBEDDING_TENSORS}
    return DraftCheckpoint(checkpoint.config, tensors, checkpoint.extras, checkpoint.layout)


def import_draft(src: str | Path, out: str | Path, options: ConvertOptions = ConvertOptions(),
                 overwrite: bool = False) -> ConversionReport:
    """Read a draft in any supported layout and write dspark's native folder."""
    checkpoint = _checked(read_checkpoint(src, options), options)
    if options.drop_embeddings:
        checkpoint = _without_embeddings(checkpoint)
    folder = _prepare(out, overwrite)
    write_native(checkpoint, folder, options.int8)
    _copy_auxiliary(src, folder)
    return _report(Path(src), checkpoint, folder, NATIVE, checkpoint.tensors)


_EXPORTERS = {DEEPSPEC: deepspec.export_files, SPECULATORS: speculators.export_files, DFLASH: dflash.export_files}


def _exporter(layout: str, checkpoint: DraftCheckpoint):
    if layout == SPECFORGE:  # SpecForge writes DFlash-mode drafts as DFlashDraftModel (configs/qwen3-8b-dflash.json)
        return dflash.export_files if checkpoint.config.mode == "dflash" else specforge.export_files
    if layout not in _EXPORTERS:
        raise CheckpointError(f"unknown layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    return _EXPORTERS[layout]


def export_draft(src: str | Path, out: str | Path, layout: str, options: ConvertOptions = ConvertOptions(),
                 overwrite: bool = False) -> ConversionReport:
    """Read a draft in any supported layout and write it in `layout` (native included)."""
    if layout == NATIVE:
        return import_draft(src, out, options, overwrite)
    if options.int8:
        raise CheckpointError(f"int8 storage is dspark's own (for shipping drafts); the {layout} layout's loaders "
                              f"expect ordinary weights: drop --int8, or export with --layout native")
    checkpoint = _checked(read_checkpoint(src, options), options)
    data, tensors = _exporter(layout, checkpoint)(checkpoint, options)
    folder = _prepare(out, overwrite)
    write_tensors(folder, tensors)
    write_json(folder / CONFIG_NAME, data)
    _copy_auxiliary(src, folder)
    return _report(Path(src), checkpoint, folder, layout, tensors)
