"""The engine: B sequences decoded together, each row at its own position; batch 1 is one row of it.

`BatchEngine` is built once over a target backend (backend.py: the static backend for Llama / Qwen3 / Qwen2 / Mistral,
with CUDA graphs and Triton kernels on a GPU, or the Hugging Face backend for any other causal LM) and a draft, and
generates many times: `open` starts a stepping session that requests join and leave while the batch decodes
(batch_session.py, the host bookkeeping); `generate` runs a fixed list of prompts through one session;
`generate_batch` is the one-shot form. Each round: propose → schedule → verify (every row at the round's width t) →
accept → extend the draft → advance, all on device (batch_round.py); the host syncs once per round to read [accepted,
L, committed …] of every row (after the next block is drafted, or, for a round that drafts nothing or runs many rows,
on a GPU after the next round is launched: the device need not wait for this bookkeeping), then applies EOS (an
accepted EOS ends the row; later tokens are dropped), the max_new_tokens budget, and continuous batching: a finished
row's slot takes the next prompt, and live rows move down into free ones when that shrinks the row bucket
(batch_session.py). With a `TreeShape` each round verifies a tree of drafts per row instead of the block's chain
(static backend; up to its max_rows rows; greedy or sampled). With drafting off the same loop is plain decoding (L =
0, t = 1). Lossless: greedy output equals the target's own greedy decoding per prompt; sampled output follows the
target's distribution.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import torch

from dspark.config import GenerationConfig
from dspark.engine.batch_round import BatchRound
from dspark.engine.batch_session import BatchSession
from dspark.engine.backend import backend_for
from dspark.engine.stats import GenerationResult
from dspark.engine.schedule import RULES, Scheduling, StepCostTable
from dspark.engine.static_draft import StaticDraft
from dspark.engine.static_target import StaticTarget
from dspark.engine.tree import TreeShape
from dspark.model.draft import DSparkDraft
from dspark.model.target import Target

PREFILL_GRAPH_TOKENS = 8192  # a prefill of at most this many padded tokens replays a CUDA graph; a larger one is eager


def prepare_pair(target: Target, draft: DSparkDraft) -> None:
    """Check that the pair fits and give the draft the target's embedding / LM head if it has none of its own."""
    target.check_draft(draft.config)
    if draft.embed_tokens is None:
        draft.tie_embeddings(target.embed_tokens, target.lm_head)


def drafts_per_round(draft: DSparkDraft | None, config: GenerationConfig) -> int:
    """Drafts verified per round at most: config.max_drafts, capped by the draft's block (0: plain decoding)."""
    if draft is None or config.max_drafts == 0:
        return 0
    available = draft.config.num_draft_tokens
    if config.max_drafts is None:
        return available
    if config.max_drafts > available:
        raise ValueError(f"max_drafts {config.max_drafts} exceeds what the draft proposes per block ({available})")
    return config.max_drafts


class BatchEngine:
    """Static caches for `max_batch` sequences of up to `max_length` positions (prompt + new tokens + a block)."""

    def __init__(self, target: Target, draft: DSparkDraft | None, max_batch: int = 8, max_length: int = 2048,
                 cuda_graphs: bool | None = None, pad_to_buckets: bool | None = None, tree: TreeShape | None = None,
                 overlap: bool | None = None):
        """`cuda_graphs` (default: on a CUDA device with the static backend) captures the greedy round's steps.
        `tree`: verify a tree of drafts per row instead of the block's chain (tree.py; greedy or sampled, no
        scheduling rule; rounds over more than tree.max_rows rows verify the chain). `overlap` (default: on a CUDA
        device) launches a round that drafts nothing, or one over many rows, before the host commits the previous one
        (`BatchSession.step`), so the device does not wait for the host's bookkeeping; the same tokens either way."""
        if max_batch < 1 or max_length < 2:
            raise ValueError("max_batch must be >= 1 and max_length >= 2")
        if tree is not None:
            if draft is None:
                raise ValueError("a tree engine needs a draft (its trees are the draft's)")
            tree.check(draft.config.num_draft_tokens)
        if draft is not None:
            prepare_pair(target, draft)
        self.target, self.draft = target, draft
        self.max_batch, self.max_length = max_batch, max_length
        room = max(0, tree.nodes - draft.config.num_draft_tokens) if tree is not None else 0  # a tree's extra slots
        self.backend = backend_for(target, max_batch, max_length + room)
        if tree is not None and not self.backend.supports_tree:
            raise ValueError(f"tree verification needs the static backend (Llama / Qwen3 / Qwen2 / Mistral); "
                             f"{type(target.model).__name__} runs through the Hugging Face backend, which verifies "
                             f"the chain: build the engine without a tree")
        # the draft's cache as long as the target's: a graphed prefill may span the target's whole cache
        self.static_draft = StaticDraft(draft, max_batch, max_length + room) if draft is not None else None
        on_cuda, static = target.device.type == "cuda", isinstance(self.backend, StaticTarget)
        self.cuda_graphs = (on_cuda and static) if cuda_graphs is None else cuda_graphs
        if self.cuda_graphs and not (on_cuda and static):
            raise ValueError("cuda_graphs=True needs the target on a CUDA device and the static backend "
                             "(Llama / Qwen3 / Qwen2 / Mistral)")
        self.round = BatchRound(self.backend, self.static_draft, max_batch, tree)
        self.overlap = on_cuda if overlap is None else overlap
        self.pad_to_buckets = self.cuda_graphs if pad_to_buckets is None else pad_to_buckets
        # row counts the graphs are captured for: the powers of two below max_batch, and max_batch
        self.buckets = tuple(2 ** k for k in range(max_batch.bit_length()) if 2 ** k < max_batch) + (max_batch,)
        self.graphs = None
        self._session: BatchSession | None = None
        if self.cuda_graphs:
            from dspark.engine.graphs import RoundGraphs

            self.graphs = RoundGraphs(self.round)

    # --- the steps, graphed or eager -----------------------------------------------------------------------------
    def width_rows(self, n: int) -> int:
        return next(b for b in self.buckets if b >= n) if self.pad_to_buckets else n

    def window(self, furthest: int) -> int:
        """Attention window covering positions < furthest: a power of two from 256 (few graph shapes), capped."""
        window = 256
        while window < furthest:
            window *= 2
        return min(window, self.backend.max_length)

    def propose(self, b: int, window: int) -> None:
        if self.graphs is not None and self.graphs.supports():
            self.graphs.propose(b, window)
        else:
            self.round.propose(b, window)

    def verify(self, b: int, t: int, window: int) -> None:
        if self.graphs is not None and self.graphs.supports():
            self.graphs.verify(b, t, window)
        else:
            self.round.verify(b, t, window)

    def _prefill_shape(self, k: int, longest: int) -> tuple[int, int, bool]:
        """(entries, width, graphed) of a prefill of k prompts, the longest `longest` tokens: with CUDA graphs a
        bucket of entries × a power of two from 64 tokens (few shapes), when that is at most PREFILL_GRAPH_TOKENS;
        else the exact shape, eagerly (a long prefill amortises its launches)."""
        if self.graphs is None or not self.graphs.supports():
            return k, longest, False
        rows, width = self.width_rows(k), 64
        while width < longest:
            width *= 2
        width = min(width, self.backend.max_length)
        if rows * width > PREFILL_GRAPH_TOKENS:
            return k, longest, False
        return rows, width, True

    def admit(self, slots: list[int], prompts: list[list[int]], budgets: list[int],
              samplings: Sequence[tuple[GenerationConfig, int]] | None = None) -> list[int]:
        """Prefill prompts into rows `slots` together, each with its own token budget (new tokens, the first
        included) and, with `samplings`, its own (sampling settings, seed); returns each one's first new token (one
        sync)."""
        for slot, (config, seed) in zip(slots, samplings or ()):
            self.round.set_sampling(slot, config, seed)
        rows, width, graphed = self._prefill_shape(len(slots), max(len(p) for p in prompts))
        self.round.stage(slots, prompts, budgets, rows, width)
        if graphed:
            self.graphs.prefill(rows, width)
        else:
            self.round.prefill(rows, width)
        return self.round.first[: len(slots)].tolist()

    # --- generation ----------------------------------------------------------------------------------------------
    def check_request(self, label: object, prompt: Sequence[int], max_new_tokens: int, gamma: int) -> None:
        """Refuse a request the engine cannot hold, with a message that says what to change."""
        vocab = self.target.vocab_size
        if len(prompt) == 0:
            raise ValueError(f"prompt {label} is empty; every prompt needs at least one token id")
        if min(prompt) < 0 or max(prompt) >= vocab:
            raise ValueError(f"prompt {label} has token ids outside the target vocabulary [0, {vocab})")
        need = len(prompt) + max_new_tokens + self.round.gamma_max + 1
        if need > self.max_length:
            raise ValueError(f"prompt {label} ({len(prompt)} tokens) + max_new_tokens ({max_new_tokens}) + a block "
                             f"needs {need} positions but the engine holds {self.max_length}; build the BatchEngine "
                             f"with a larger max_length or shorten the request")
        if gamma and need - 1 > self.draft.config.max_position_embeddings:
            raise ValueError(f"prompt {label} + max_new_tokens runs past the draft's "
                             f"{self.draft.config.max_position_embeddings} positions; shorten the request")

    def open(self, config: GenerationConfig = GenerationConfig(), scheduling: Scheduling | None = None,
             calibration: torch.Tensor | None = None) -> BatchSession:
        """A stepping session with `config`'s sampling settings (its max_new_tokens / eos_token_ids are only the
        defaults of `add`; eos_token_ids None: the target's); ends any earlier session of this engine. `scheduling`
        None: the threshold rule when config.confidence_threshold > 0, else none. `calibration`: the confidence
        head's per-slot temperatures (default: the draft's own)."""
        if config.eos_token_ids is None:
            config = replace(config, eos_token_ids=self.target.eos_token_ids)
        gamma = drafts_per_round(self.draft, config)
        if scheduling is None:
            scheduling = Scheduling("threshold" if config.confidence_threshold > 0 else "none")
        if calibration is None and self.draft is not None:
            calibration = getattr(self.draft, "sts_temperatures", None)
        self._end_session()
        generator = torch.Generator()  # on the host: drawing a request's seed must not wait for the device
        generator.manual_seed(config.seed if config.seed is not None else int(torch.randint(2**62, (1,))))
        self.round.begin(config, gamma, scheduling, calibration)
        self._session = BatchSession(self, config, gamma, generator, scheduling)
        return self._session

    def _end_session(self) -> None:
        """The open session (if any) ends: its rows are retired and it refuses further steps."""
        if self._session is not None:
            self._session.closed = True
            self._session = None
        for slot in range(self.max_batch):
            self.round.retire(slot)

    def generate(self, prompts: Sequence[Sequence[int]], config: GenerationConfig = GenerationConfig(),
                 scheduling: Scheduling | None = None, calibration: torch.Tensor | None = None,
                 on_finish: Callable[[int], None] | None = None) -> list[GenerationResult]:
        """Generate for every prompt (token id lists); results in prompt order. A loop over one session.
        `on_finish(i)` is called when prompt i finishes (a progress bar)."""
        if not prompts:
            raise ValueError("prompts is empty: pass at least one list of token ids")
        session = self.open(config, scheduling, calibration)
        for i, prompt in enumerate(prompts):
            session.add(i, prompt, config.max_new_tokens)
        while not session.idle:
            for update in session.step():
                if update.finished and on_finish is not None:
                    on_finish(update.request_id)
        return [session.release(i) for i in range(len(prompts))]

    # --- capture and measurement (idle engine only: no sequence may be in flight) --------------------------------
    def warm_up(self, max_batch: int | None = None, context: int | None = None) -> int:
        """Run (and, with CUDA graphs, capture) every greedy step shape a generation can need: each batch bucket up to
        `max_batch`, the propose step under each scheduling rule, verify widths 1 … γ+1, attention windows up to
        `context` positions (default: the whole cache), and the graphed prefill shapes up to that window, so no
        capture lands inside a timed run. Returns how many shapes it ran."""
        self._end_session()
        rows = [b for b in self.buckets if b <= self.width_rows(max_batch or self.max_batch)]
        top = self.window(context if context is not None else self.backend.max_length)
        windows = sorted({self.window(w) for w in (256 * 2**k for k in range(32)) if w < top} | {top})
        self.round.begin(GenerationConfig(), self.round.gamma_max)
        if self.draft is None:
            rules = ()  # no propose step
        elif self.round.tree is not None:
            rules = ("none",)  # a tree engine schedules nothing
        else:  # a propose step is captured with its session's rule
            rules = RULES if self.draft.confidence_head is not None else ("none",)
        shapes, done = 0, set()
        for b in rows:
            for window in windows:
                for rule in rules:
                    self.round.rule = rule  # what the step computes, not its values: those are read from buffers
                    self.propose(b, window)
                    shapes += 1
                self.round.rule = "none"
                tree = self.round.uses_tree(b)
                for t in (1, self.round.verify_span) if tree else range(1, self.round.gamma_max + 2):
                    self.verify(b, t, window)
                    shapes += 1
        if self.graphs is not None:  # prefill shapes: entries × widths 64, 128, … (as _prefill_shape picks them)
            for b in rows:
                for longest in (64 * 2**k for k in range(32)):
                    entries, width, graphed = self._prefill_shape(b, longest)
                    if not graphed or width > top or (entries, width) in done:
                        break
                    done.add((entries, width))
                    self.round.stage([0], [[0]], [1], entries, width)
                    self.graphs.prefill(entries, width)
                    shapes += 1
        self._end_session()  # the dummy prefills took row 0
        return shapes

    def round_cost_tables(self, batches: Sequence[int] | None = None) -> dict[int, StepCostTable]:
        """Algorithm 1's tables: `measure_step_costs` at each batch size in `batches` (default 1, 2, 4, … up to
        max_batch) -> {batch size: round cost by verify width}."""
        if batches is None:
            batches = sorted({min(2 ** k, self.max_batch) for k in range(self.max_batch.bit_length() + 1)})
        return {batch: self.measure_step_costs(batch) for batch in sorted(batches)}

    def plain_step_rates(self, batches: Sequence[int] | None = None) -> dict[int, float]:
        """Plain decoding's steps per second at each batch size (the same sizes as `round_cost_tables`): a verify of
        the anchor alone, no draft block (`Scheduling.plain`)."""
        if batches is None:
            batches = sorted({min(2 ** k, self.max_batch) for k in range(self.max_batch.bit_length() + 1)})
        return {batch: self.measure_step_costs(batch, [1], drafting=False)(1) for batch in sorted(batches)}

    def measure_step_costs(self, batch: int, widths: Sequence[int] | None = None, repeats: int = 5,
                           context: int | None = None, drafting: bool = True) -> StepCostTable:
        """Time whole rounds at `batch` rows: one draft block (paid whatever is verified) + the verify step with every
        row at width T, for T in `widths` (default 1 … γ+1), attending to a `context`-position window (default: the
        whole cache) -> a StepCostTable over the verify width T. The widths are timed in turn, `repeats` times over,
        and each width keeps its median round, so a burst of load on a shared machine lands on one sample of every
        width rather than on all samples of one. Latency is made non-decreasing in T (a wider verify never costs
        less; a timing dip must not stop Algorithm 1 early). `drafting` False: rounds without the draft block.
        Greedy; runs on idle rows."""
        self._end_session()
        widths = list(widths) if widths is not None else list(range(1, self.round.gamma_max + 2))
        b = self.width_rows(batch)
        window = self.window(context if context is not None else self.backend.max_length)
        self.round.begin(GenerationConfig(), self.round.gamma_max)
        synchronize = torch.cuda.synchronize if self.backend.device.type == "cuda" else (lambda: None)

        def one_round(t: int) -> None:
            if self.draft is not None and drafting:
                self.propose(b, window)
            self.round.lengths[:b] = t - 1  # every row verifies t − 1 drafts
            self.verify(b, t, window)

        widths = sorted(widths)
        for t in widths:
            one_round(t)  # warm-up (and graph capture)
        samples: dict[int, list[float]] = {t: [] for t in widths}
        for _ in range(max(1, repeats)):
            for t in widths:
                synchronize()
                began = time.perf_counter()
                one_round(t)
                synchronize()
                samples[t].append(1000.0 * (time.perf_counter() - began))
        latency, slowest = {}, 0.0
        for t in widths:
            slowest = max(slowest, statistics.median(samples[t]))
            latency[t] = slowest
        return StepCostTable.from_latency_ms(latency)


def engine_for(target: Target, draft: DSparkDraft | None, prompts: Sequence[Sequence[int]], max_new_tokens: int,
               max_batch: int = 8, cuda_graphs: bool | None = None, max_positions: int | None = None,
               tree: TreeShape | None = None) -> BatchEngine:
    """A BatchEngine just big enough for these prompts: at most `max_batch` rows (no more than there are prompts),
    each as long as the longest prompt + `max_new_tokens` + a block; with `max_positions`, fewer rows (at least one)
    so that rows × length stays within it (the static caches' size)."""
    gamma = draft.config.num_draft_tokens if draft is not None else 0
    length = max(len(p) for p in prompts) + max_new_tokens + gamma + 1 if prompts else 2
    rows = min(max_batch, max(1, len(prompts)))
    if max_positions is not None:
        rows = max(1, min(rows, max_positions // length))
    return BatchEngine(target, draft, rows, length, cuda_graphs, tree=tree)


def generate_batch(target: Target, draft: DSparkDraft | None, prompts: Sequence[Sequence[int]],
                   config: GenerationConfig = GenerationConfig(), scheduling: Scheduling | None = None,
                   max_batch: int = 8, cuda_graphs: bool | None = None) -> list[GenerationResult]:
    """One-shot batched generation (builds a BatchEngine sized for these prompts; keep an engine to reuse it)."""
    engine = engine_for(target, draft, prompts, config.max_new_tokens, max_batch, cuda_graphs)
    return engine.generate(prompts, config, scheduling)
