"""Doctor rules that compare the draft checkpoint with the engine, the target and the served context.

The silent killers here serve without an error and show up only as acceptance near 1.0 or a cliff at
long context: a DFlash-aligned draft under a DSpark method (or the reverse), layer ids in the other
base, a layout the engine does not read, a mask token outside the vocabulary, a RoPE range shorter
than the prompts. Sources are cited in each rule.
"""
from __future__ import annotations

from dspark.deploy.checkpoint_facts import DFLASH, DSPARK
from dspark.deploy.doctor_context import DoctorContext
from dspark.deploy.findings import ERROR, WARNING, Finding, Rule

ALGORITHM = Rule(
    "CK-ALGORITHM", ERROR, "the engine's speculative method does not fit a DSpark/DFlash draft",
    "SGLang loads DSpark drafts only under --speculative-algorithm DSPARK (DFLASH for DFlash drafts), vLLM under "
    "method dspark / dflash (vllm/config/speculative.py), TensorRT-LLM under decoding_type DSpark / DFlash; other "
    "methods build a different draft network (cf. sglang PR #21272: the wrong algorithm gives accept_len 1.00).")
ANCHOR = Rule(
    "CK-ANCHOR-LAYOUT", ERROR, "anchor layout of the draft differs from the engine's method",
    "A DSpark draft's slot k predicts x[p+k+1] ('sample from anchor'); a DFlash draft's slot 0 predicts nothing "
    "and slot k predicts x[p+k]. Engines follow the method, not the checkpoint (vllm#56792, sglang#40144: "
    "checkpoints in the other layout serve silently with under 1% acceptance).")
HEADS = Rule(
    "CK-HEADS-DROPPED", ERROR, "the draft's Markov / confidence heads are not served",
    "A DSpark draft on the DFlash block layout (speculators' sample_from_anchor false) carries a Markov head that "
    "restores the dependency between its drafts, and a confidence head. A DFlash method builds the plain DFlash "
    "network and does not use them, so every slot after the first loses the bias it was trained with "
    "(benchmarks/results/smollm2/ measures what that costs), while a DSpark method "
    "expects the anchor layout (CK-ANCHOR-LAYOUT). speculators trains such drafts (models/dspark/core.py, "
    "sample_from_anchor false).")
LAYER_BASE = Rule(
    "CK-LAYER-ID-BASE", ERROR, "layer-id base of the draft is wrong or ambiguous for this engine",
    "Hugging Face ids name a layer's output (hidden_states[i+1]); vLLM/speculators aux ids name its input (= our "
    "id + 1). SGLang's DSPARK reads target_layer_ids of a Qwen3DSparkModel config and needs speculators "
    "checkpoints transformed first (speculators#753: target_layer_ids = aux - 1); the wrong base feeds the draft "
    "neighbouring layers' features and acceptance falls to about 1.0.")
LAYOUT = Rule(
    "CK-LAYOUT-ENGINE", ERROR, "checkpoint layout not loadable by this engine",
    "SGLang DSPARK loads architectures ['Qwen3DSparkModel'] (SpecForge normalizes its DSparkDraftModel exports "
    "with scripts/gates/normalize_dflash_export.py before serving); TensorRT-LLM's DSpark loads DeepSpec dense "
    "checkpoints (TensorRT-LLM PR #16813, modeling_dspark.py); vLLM accepts DeepSpec, SpecForge and speculators "
    "layouts (vllm/config/speculative.py auto-detection).")
LAYER_RANGE = Rule(
    "CK-LAYER-ID-RANGE", ERROR, "target layer ids outside the target's layers",
    "Engines capture hidden states of the listed target layers; an id >= the target's num_hidden_layers does not "
    "exist (startup failure or no features), and the final layer is stored post-norm by Hugging Face, which "
    "DeepSpec refuses (deepspec/eval/base_evaluator.py assert_no_final_target_layer).")
MASK = Rule(
    "CK-MASK-TOKEN", ERROR, "mask token outside the target vocabulary",
    "The draft fills every non-anchor slot with the target's (frozen) embedding row of mask_token_id (DeepSpec "
    "deepspec/modeling/dspark/qwen3/modeling.py; vLLM reads dflash_config.mask_token_id, NVIDIA-NeMo/Automodel "
    "PR #2913); an id outside [0, vocab_size) indexes past the table and a missing id leaves the engine to guess.")
CONTEXT = Rule(
    "CK-CONTEXT-RANGE", ERROR, "draft RoPE range shorter than the served context",
    "The draft's positions come from its own RoPE (YaRN range = factor x original_max_position_embeddings, "
    "capped by max_position_embeddings); beyond it some engines clamp positions silently and acceptance falls "
    "off a cliff (sglang#6783; TensorRT-LLM PR #16813 review; Inferact/Kimi-K3-DSpark discussion #2).")
HIDDEN = Rule(
    "CK-HIDDEN-SIZE", ERROR, "draft expects a different target hidden size",
    "The draft's fc layer maps the concatenated target hidden states (layers x target_hidden_size) to its width "
    "(DeepSpec deepspec/modeling/dspark/common.py; speculators models/dspark/config.py target_hidden_size); a "
    "target of another hidden size cannot be loaded against it.")

RULES = (ALGORITHM, ANCHOR, HEADS, LAYER_BASE, LAYOUT, LAYER_RANGE, MASK, CONTEXT, HIDDEN)

_METHOD_NAME = {"sglang": ("--speculative-algorithm", {DSPARK: "DSPARK", DFLASH: "DFLASH"}),
                "vllm": ('"method"', {DSPARK: '"dspark"', DFLASH: '"dflash"'}),
                "trtllm": ("decoding_type", {DSPARK: "DSpark", DFLASH: "DFlash"})}


def _method_fix(engine: str | None, anchor: str) -> str:
    if engine not in _METHOD_NAME:
        return f"serve it with the {anchor} method"
    flag, names = _METHOD_NAME[engine]
    return f"set {flag} {names[anchor]}"


def _method(ctx: DoctorContext) -> list[Finding]:
    draft, method = ctx.draft, ctx.method
    if draft is None or ctx.view is None:
        return []
    anchor = draft.anchor_layout
    if method is None:
        return [ALGORITHM.fire("speculative decoding is off: the draft is not used",
                               _method_fix(ctx.engine, anchor), "no speculative method in the command")]
    if method not in (DSPARK, DFLASH):
        return [ALGORITHM.fire(f"method {method!r} builds another draft network: load failure or acceptance ~1.0",
                               _method_fix(ctx.engine, anchor), f"method {method}, draft {anchor}-aligned")]
    if method != anchor:
        return [ANCHOR.fire(
            f"this {anchor}-aligned draft is served as {method}: every slot predicts the wrong position and "
            "acceptance collapses to about 1.0",
            f"{_method_fix(ctx.engine, anchor)}, or re-export the draft in the {method} layout",
            f"engine method {method}, draft anchor layout {anchor} ({draft.source})")]
    if anchor == DFLASH and (draft.markov_rank or draft.enable_confidence_head):
        return [HEADS.fire(
            "this DFlash-aligned draft has DSpark heads, which a dflash method does not use: its later drafts lose "
            "their Markov bias and acceptance falls",
            "serve it with `dspark serve` (it runs the heads on either layout), or train an anchored DSpark draft "
            "(`--mode dspark`) and serve it with the dspark method",
            f"engine method {method}, markov_rank {draft.markov_rank}, confidence head {draft.enable_confidence_head}"
            f" ({draft.source})")]
    return []


def _export_layout(anchor: str) -> str:
    """The `dspark export --layout` that SGLang / TensorRT-LLM load for a draft of this anchor layout."""
    return "deepspec" if anchor == DSPARK else "dflash"


def _layout(ctx: DoctorContext) -> list[Finding]:
    draft, engine = ctx.draft, ctx.engine
    if draft is None or engine is None:
        return []
    out: list[Finding] = []
    for problem in draft.problems:
        out.append(LAYER_BASE.fire("the draft may read the wrong target layers: acceptance near 1.0",
                                   "keep the base the draft was trained with (`dspark import DRAFT OUT` refuses the "
                                   "ambiguity and names the field), then write it for this engine with `dspark export "
                                   "OUT FIXED --layout ...`, which states one base", problem))
    if draft.layout == "speculators" and engine in ("sglang", "trtllm"):
        out.append(LAYER_BASE.fire(
            f"{engine} reads this speculators checkpoint (aux ids = layer inputs) without the -1 shift: it fails to "
            "load or captures the layer after each intended one",
            f"export it with `dspark export DRAFT OUT --layout {_export_layout(draft.anchor_layout)} --target "
            "TARGET`, or serve it with vLLM",
            f"speculators layout, aux ids = {[i + 1 for i in draft.target_layer_ids or ()]}"))
    elif draft.layout == "specforge" and ((engine == "sglang" and ctx.method == DSPARK) or engine == "trtllm"):
        out.append(LAYOUT.fire(
            f"{engine} does not load the SpecForge DSparkDraftModel layout (nested dflash_config)",
            "export it with `dspark export DRAFT OUT --layout deepspec --target TARGET`",
            "architectures DSparkDraftModel"))
    elif draft.layout == "unknown":
        out.append(LAYOUT.fire("the doctor cannot tell which layout this draft is in, so neither can the engine's "
                               "auto-detection", "state the architecture in config.json (Qwen3DSparkModel, "
                               "DSparkDraftModel, DFlashDraftModel or speculators_model_type), then write the "
                               "engine's layout with `dspark export DRAFT OUT --layout ...`",
                               "no architectures / target_layer_ids / speculators_model_type", severity=WARNING))
    return out


def _target_fit(ctx: DoctorContext) -> list[Finding]:
    draft, target = ctx.draft, ctx.target
    if draft is None:
        return []
    out: list[Finding] = []
    ids = draft.target_layer_ids or ()
    if target is not None and target.num_hidden_layers and ids:
        layers = target.num_hidden_layers
        bad = [i for i in ids if i >= layers or i < -1]
        if bad:
            out.append(LAYER_RANGE.fire(
                f"layer ids {bad} do not exist in a {layers}-layer target: no features, startup failure",
                "retrain or re-export the draft for this target", f"target_layer_ids {list(ids)}, {layers} layers"))
        elif layers - 1 in ids:
            out.append(LAYER_RANGE.fire(
                f"id {layers - 1} is the final layer, whose Hugging Face hidden state is post-norm",
                "use ids below the final layer", f"target_layer_ids {list(ids)}", severity=WARNING))
    mask = draft.mask_token_id
    vocab = target.vocab_size if target is not None else None
    if mask is None and ctx.method in (DSPARK, DFLASH):
        out.append(MASK.fire("the engine falls back to its own default mask token: the draft sees an untrained "
                             "embedding in every non-anchor slot", "write mask_token_id into the draft config",
                             "no mask_token_id", severity=WARNING))
    elif mask is not None and vocab and not 0 <= mask < vocab:
        out.append(MASK.fire(f"mask token {mask} is outside the target's {vocab}-token vocabulary: embedding "
                             "lookup out of range", "use the mask token the draft was trained with, inside the "
                             "vocabulary", f"mask_token_id {mask}, vocab_size {vocab}"))
    span, context = draft.position_range, ctx.context_length
    if span and context and context > span:
        out.append(CONTEXT.fire(
            f"prompts past {span:,} tokens fall outside the draft's RoPE range (served context {context:,}, "
            f"{ctx.context_source}): acceptance drops off a cliff there",
            f"cap the context at {span:,} (SGLang --context-length, vLLM --max-model-len, TensorRT-LLM "
            "--max_seq_len), or use a draft with a longer YaRN range",
            f"draft max_position_embeddings {draft.max_position_embeddings}, rope {draft.rope_type} x"
            f"{draft.rope_factor} of {draft.rope_original_max}"))
    hidden = target.hidden_size if target is not None else None
    if draft.target_hidden_size and hidden and draft.target_hidden_size != hidden:
        out.append(HIDDEN.fire(f"the draft expects target hidden size {draft.target_hidden_size}, the target has "
                               f"{hidden}: the draft cannot be loaded", "use the draft trained for this target",
                               f"{draft.target_hidden_size} vs {hidden}"))
    return out


def check(ctx: DoctorContext) -> list[Finding]:
    """Checkpoint-versus-engine/target/context rules."""
    found: list[Finding] = []
    for part in (_method, _layout, _target_fit):
        found.extend(part(ctx))
    return found
