"""Resolve a draft or target named on the `dspark launch` / `dspark doctor` command line: a preset or a path.

It holds no table. Draft presets are `dspark.config.PRESETS` with their published repos in
`dspark.config.PRESET_REPOS`; target presets are `dspark.plan.presets.TARGET_PRESETS` (shapes, repo, and whether the
checkpoint needs --trust-remote-code). This module only turns them into the `DraftFacts` / `TargetFacts` serving needs.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from dspark.config import PRESET_REPOS, DraftConfig, preset
from dspark.config import PRESETS as CONFIG_DRAFT_PRESETS
from dspark.deploy.checkpoint_facts import (
    CheckpointError,
    DraftFacts,
    TargetFacts,
    load_config_json,
    read_draft,
    target_facts_from_dict,
)
from dspark.plan.presets import TARGET_PRESETS as PLAN_TARGET_PRESETS


@dataclass(frozen=True)
class Resolved:
    """A draft or target: its facts, and the path or repo id a launch command should load ("" = unknown)."""

    facts: DraftFacts | TargetFacts
    path: str
    preset: str | None = None
    trust_remote_code: bool = False  # the engines need custom model code for this checkpoint


def draft_facts_from_config(cfg: DraftConfig, source: str) -> DraftFacts:
    """DraftFacts of a `dspark.config.DraftConfig` (the native, DeepSpec-compatible layout)."""
    rope = cfg.rope
    return DraftFacts(
        source=source, layout="deepspec", anchor_layout=cfg.mode, block_size=cfg.block_size,
        target_layer_ids=tuple(cfg.target_layer_ids), mask_token_id=cfg.mask_token_id,
        hidden_size=cfg.hidden_size, vocab_size=cfg.vocab_size, num_hidden_layers=cfg.num_hidden_layers,
        max_position_embeddings=cfg.max_position_embeddings, rope_type=rope.rope_type, rope_factor=rope.factor,
        rope_original_max=rope.original_max_position_embeddings, markov_rank=cfg.markov_rank,
        markov_head_type=cfg.markov_head_type if cfg.markov_rank else None,
        enable_confidence_head=cfg.enable_confidence_head,
    )


def draft_preset(name: str) -> Resolved:
    return Resolved(draft_facts_from_config(preset(name), f"preset:{name}"), PRESET_REPOS.get(name, ""), name)


def target_preset(name: str) -> Resolved:
    spec = PLAN_TARGET_PRESETS[name]()
    facts = TargetFacts(source=f"preset:{name}", num_hidden_layers=spec.layers, hidden_size=spec.hidden,
                        vocab_size=spec.vocab, max_position_embeddings=spec.max_context)
    return Resolved(facts, spec.hf_repo, name, spec.trust_remote_code)


def preset_for_path(path: str | None, role: str) -> Resolved | None:
    """The preset whose public repo is `path` (so a command naming it gets the preset's facts), if any."""
    if not path:
        return None
    if role == "draft":
        return next((draft_preset(n) for n, repo in PRESET_REPOS.items() if repo == path), None)
    return next((r for r in map(target_preset, PLAN_TARGET_PRESETS) if r.path == path), None)


def _unknown(kind: str, name: str, presets) -> CheckpointError:
    return CheckpointError(
        f"{kind} {name!r} is neither a preset ({', '.join(presets)}) nor a folder with a config.json"
    )


def resolve_target(name_or_path: str, path_override: str | None = None) -> Resolved:
    """A target preset name, a checkpoint folder, or a config.json -> Resolved."""
    if name_or_path in PLAN_TARGET_PRESETS:
        found = target_preset(name_or_path)
        return Resolved(found.facts, path_override or found.path, found.preset, found.trust_remote_code)
    if os.path.exists(name_or_path):
        folder = os.path.dirname(name_or_path) if os.path.isfile(name_or_path) else name_or_path
        cfg = load_config_json(name_or_path)
        return Resolved(target_facts_from_dict(cfg, name_or_path), path_override or folder or ".",
                        trust_remote_code="auto_map" in cfg)
    raise _unknown("target", name_or_path, PLAN_TARGET_PRESETS)


def resolve_draft(name_or_path: str, path_override: str | None = None) -> Resolved:
    """A draft preset name, a checkpoint folder, or a config.json -> Resolved."""
    if name_or_path in CONFIG_DRAFT_PRESETS:
        found = draft_preset(name_or_path)
        return Resolved(found.facts, path_override or found.path, found.preset)
    if os.path.exists(name_or_path):
        folder = os.path.dirname(name_or_path) if os.path.isfile(name_or_path) else name_or_path
        return Resolved(read_draft(name_or_path), path_override or folder or ".")
    raise _unknown("draft", name_or_path, CONFIG_DRAFT_PRESETS)
