"""The device side of one batched round: row buffers and the fixed-shape steps that read and write them.

Rows 0 … b−1 of the buffers are the round's rows (b = active rows, or a bucket padded with inactive rows, whose budget
is 0 so they verify nothing and never advance). `stage` + `prefill(rows, width)` admit prompts. `propose(b)` drafts a
block per row and then `schedule(b)` decides how many drafts each row verifies (the session's rule, fixed by `begin`,
runs inside the same captured step; a rule's width is the one extra value the host reads); `verify(b, t)` runs the
target over [anchor, d_0 … d_{t−2}] at width t, accepts (greedy or rejection sampling), extends the draft's context with
the verified features (on CUDA on a second stream, beside acceptance) and advances start / budget / anchor, writing
[accepted, L, committed tokens …] into `packed` for the host to read in one sync (`packed_reader` queues that copy, so
steps queued after it run on). With a tree shape (tree.py) `propose` builds each row's tree and `verify` runs the
whole tree, accepts its deepest path that matches the target's own choices (argmax, or a draw after every slot when
sampling) and moves that path's keys/values behind the anchor. Steps take only ints, so CUDA graphs can capture them
(see graphs.py; greedy rounds only). Host-side bookkeeping (EOS, admission, results) lives in batch_session.py.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from dspark.config import GenerationConfig
from dspark.engine import tree_kernel
from dspark.engine.accept import accept_greedy, accept_sampling
from dspark.engine.backend import TargetBackend
from dspark.engine.schedule import Scheduling, scheduled_lengths
from dspark.engine.sampling import RowSampling
from dspark.engine.static_draft import StaticDraft
from dspark.engine.tree import TreeDrafts, TreeShape, accept_tree, accepted_path, build_tree


class BatchRound:
    """Buffers for up to `max_batch` rows and the steps of a round over their first b rows."""

    def __init__(self, target: TargetBackend, draft: StaticDraft | None, max_batch: int, tree: TreeShape | None = None):
        self.target, self.draft = target, draft
        self.max_batch, self.tree = max_batch, tree
        self.gamma_max = draft.draft.config.num_draft_tokens if draft is not None else 0
        self.block_size = draft.block_size if draft is not None else 0
        device, g = target.device, self.gamma_max
        # a tree verify's slots (anchor + nodes), else the widest chain verify
        self.verify_span = tree.nodes + 1 if tree is not None else g + 1

        def zeros(*shape: int, dtype: torch.dtype = torch.long) -> torch.Tensor:
            return torch.zeros(shape, dtype=dtype, device=device)

        self.anchor, self.start, self.budget = zeros(max_batch), zeros(max_batch), zeros(max_batch)  # [B_max] each
        self.active = zeros(max_batch, dtype=torch.bool)  # [B_max]
        self.drafts = zeros(max_batch, g)  # [B_max, γ]
        self.confidence = zeros(max_batch, g, dtype=torch.float32)  # [B_max, γ] raw confidence logits
        self.lengths = zeros(max_batch)  # [B_max] drafts verified this round
        self.packed = zeros(max_batch, g + 3)  # [B_max, 2 + T]: accepted, L, committed tokens
        # its host copies, used in turn so a round's read-back can land while the next round's is queued (pinned on
        # CUDA, so a copy is queued without waiting for later work); none on the CPU
        self.packed_host = [torch.zeros(max_batch, g + 3, dtype=torch.long, pin_memory=True)
                            for _ in range(2 if device.type == "cuda" else 0)]
        self._reads = 0  # read-backs queued so far (which host copy the next one uses)
        self.prefill_ids = zeros(max_batch, target.max_length)  # [B_max, L] staged prompts
        self.prefill_meta = zeros(3, max_batch)  # [3, B_max] staged rows, prompt lengths, budgets
        self.first = zeros(max_batch)  # [B_max] each prefilled entry's first new token
        self.probs: torch.Tensor | None = None  # [B_max, γ, V] draft distributions (sampling only)
        self.width = zeros()  # 0-d: the round's verify width (drafts + 1), decided by a scheduling rule on device
        self.rates = zeros(max_batch + 1, g + 1, dtype=torch.float64)  # [B_max+1, γ+1] algorithm1: rounds/s by width
        self.temperatures = torch.ones(g, device=device)  # [γ] the confidence head's calibration (1: none)
        self.threshold = zeros(dtype=torch.float32)  # 0-d: the threshold rule's confidence cut
        self.config = GenerationConfig()
        self.gamma = 0
        # the draft's context extension needs only the verified features: on CUDA it overlaps acceptance
        self.extend_stream = torch.cuda.Stream(device) if device.type == "cuda" and draft is not None else None
        if tree is not None:  # the rows' trees (tree.py): tokens, parent slots, depths, slot visibility
            slots = tree.nodes + 1
            self.trees = TreeDrafts(zeros(max_batch, slots), zeros(max_batch, slots), zeros(max_batch, slots),
                                    zeros(max_batch, slots, slots, dtype=torch.bool))
        self.rule = "none"
        self.rows = RowSampling(max_batch, device)  # each row's sampling settings and random stream
        self._staged: tuple[list[int], list[int]] = ([], [])  # host copy of the staged prefill's slots and lengths

    def begin(self, config: GenerationConfig, gamma: int, scheduling: Scheduling = Scheduling(),
              calibration: torch.Tensor | None = None) -> None:
        """Settings of one session (or generate call): its default config, drafts per round (≤ the draft's), the
        scheduling rule and the confidence calibration, copied into buffers the captured steps read (each row's
        sampling settings and random stream are `rows`', set at admission)."""
        if self.tree is not None and (scheduling.rule != "none" or gamma != self.gamma_max):
            raise ValueError("tree verification verifies the whole tree and drafts the draft's full block: use no "
                             "scheduling rule and the draft's own block_size, or an engine without a tree")
        self.config, self.gamma = config, gamma
        has_confidence = self.draft is not None and self.draft.draft.confidence_head is not None
        self.rule = scheduling.rule if gamma and has_confidence else "none"
        if self.rule == "algorithm1":  # every batch size's table, in one copy
            rates = torch.stack([scheduling.rates(rows, gamma) for rows in range(1, self.max_batch + 1)])
            self.rates[1:, : gamma + 1] = rates  # [B_max, γ+1]
        self.temperatures.fill_(1.0)
        if calibration is not None:
            self.temperatures[: len(calibration)] = calibration.to(self.temperatures)[: self.gamma_max]
        self.threshold.fill_(config.confidence_threshold)
        self.lengths.zero_()

    def uses_tree(self, b: int) -> bool:
        """Whether a round over rows 0 … b−1 verifies trees (a tree shape whose max_rows admits b), else chains."""
        return self.tree is not None and self.tree.serves(b)

    @property
    def schedule_key(self) -> tuple[str, int]:
        """What a captured propose step bakes in about the session's scheduling (the rest is read from buffers)."""
        return self.rule, self.gamma

    # --- host-driven row changes (eager) -------------------------------------------------------------------------
    def set_sampling(self, slot: int, config: GenerationConfig, seed: int) -> None:
        """A row's own sampling settings (temperature, top-p, top-k) and seed, before its prompt is prefilled."""
        self.rows.set(slot, config, seed)
        chain_rounds = self.tree is None or self.tree.max_rows is not None  # rounds that verify the block's chain
        if not config.greedy and self.gamma_max and self.probs is None and chain_rounds:
            vocab = self.target.target.vocab_size
            self.probs = torch.zeros(self.max_batch, self.gamma_max, vocab, device=self.target.device)

    def greedy(self, b: int | None = None) -> bool:
        """Whether rows 0 … b−1 (default: every row) are all greedy: the round takes the greedy path (graph-safe)."""
        return self.rows.greedy(self.max_batch if b is None else b)

    def stage(self, slots: list[int], prompts: list[list[int]], budgets: list[int], rows: int, width: int) -> None:
        """Host → the prefill buffers: entries 0 … k−1 are the prompts, right-padded to `width`, for rows `slots`,
        each with its own token budget (new tokens, the first included); entries k … rows−1 repeat entry 0 (a fixed
        shape for CUDA graphs: a repeat writes the same values into the same row, so it changes nothing)."""
        k = len(slots)
        self._staged = (list(slots), [len(p) for p in prompts])
        pinned = bool(self.packed_host)  # on CUDA: copies queued without waiting for the steps before them
        ids = torch.zeros(rows, width, dtype=torch.long, pin_memory=pinned)  # [rows, P]
        for i, prompt in enumerate(prompts):
            ids[i, : len(prompt)] = torch.tensor(prompt)
        ids[k:] = ids[0]
        meta = torch.tensor([slots + slots[:1] * (rows - k), [len(p) for p in prompts] + [len(prompts[0])] * (rows - k),
                             budgets + budgets[:1] * (rows - k)], pin_memory=pinned)  # [3, rows]
        self.prefill_ids[:rows, :width].copy_(ids, non_blocking=pinned)
        self.prefill_meta[:, :rows].copy_(meta, non_blocking=pinned)

    @torch.inference_mode()
    def prefill(self, rows: int, width: int) -> None:
        """Prefill the staged prompts (`rows` entries × `width` tokens) in one pass into their cache rows and set each
        row's anchor (its first new token, also in `first`), position and budget. A padded position only writes cache
        entries past its row's prompt, which stay masked until overwritten."""
        slots, lengths, budgets = self.prefill_meta[:, :rows]  # [rows] each
        ids = self.prefill_ids[:rows, :width]  # [rows, P]
        zero = torch.zeros_like(slots)
        logits, features = self.target.forward(ids, zero, slots, logits_at=lengths - 1, window=width)  # [rows, 1, V]
        if self.draft is not None:
            self.draft.extend(features, zero, slots)
        if self.greedy():
            token = logits[:, 0].argmax(-1)  # [rows]
        else:  # only staged entries are sampled (a graphed prefill is greedy, so rows == k here)
            staged, lengths_host = self._staged
            self.rows.reseed(lengths_host, 0, staged)
            token = self.rows.sample(self.rows.probs(logits[:, 0], staged), staged)  # [rows]
        self.first[:rows] = token
        self.anchor[slots] = token
        self.start[slots] = lengths
        self.budget[slots] = budgets - 1
        self.active.index_fill_(0, slots, True)  # a scalar fill: no host tensor to copy (graph capture)

    def retire(self, slot: int) -> None:
        """Free a row: inactive, no budget, at position 0. Fills on views: `buffer[slot] = 0` would copy a host
        scalar to the device, which waits for every step queued before it."""
        self.rows.set(slot, GenerationConfig(), 0)
        self.active[slot].fill_(False)
        self.budget[slot].fill_(0)
        self.start[slot].fill_(0)

    def move_rows(self, sources: list[int], destinations: list[int]) -> None:
        """Move live rows to free ones (compaction), all in one gather and scatter per buffer: caches, state and each
        row's drafted block or tree (so a block drafted before the move stays valid); the sources are retired."""
        pinned = bool(self.packed_host)  # on CUDA: the index is copied without waiting for the steps before it
        index = torch.tensor([sources, destinations], dtype=torch.long, pin_memory=pinned)  # [2, k]
        source, destination = index.to(self.anchor.device, non_blocking=pinned)
        self.target.copy_rows(source, destination)
        if self.draft is not None:
            self.draft.copy_rows(source, destination)
        buffers = [self.anchor, self.start, self.budget, self.active, self.drafts, self.confidence, self.lengths]
        buffers += [self.probs] if self.probs is not None else []
        buffers += list(self.trees.parts) if self.tree is not None else []  # its tree: slot 0 is its own anchor
        for buffer in buffers:
            buffer.index_copy_(0, destination, buffer.index_select(0, source))  # [k, …]
        for s, d in zip(sources, destinations):
            self.rows.move(s, d)
            self.retire(s)

    def packed_reader(self, n: int, t: int) -> Callable[[], list[list[int]]]:
        """Queue the copy of rows 0 … n−1 of `packed` (columns < t + 2) to the host after the steps issued so far;
        returns a function that waits for that copy alone and gives the rows as lists, so steps queued after this
        call (the next block's draft, the next round) run on while the host commits. Call each reader before the
        next-but-one reader is made: two host copies take turns."""
        t = min(t, self.gamma_max + 1)  # a tree's verify commits at most a block and its bonus
        if not self.packed_host:
            rows = self.packed[:n, : t + 2].tolist()
            return lambda: rows
        host = self.packed_host[self._reads % 2]
        self._reads += 1
        host[:n].copy_(self.packed[:n], non_blocking=True)  # whole rows: one contiguous copy
        copied = torch.cuda.Event()
        copied.record()

        def wait() -> list[list[int]]:
            copied.synchronize()
            return host[:n, : t + 2].tolist()

        return wait

    # --- the round's steps ---------------------------------------------------------------------------------------
    @torch.inference_mode()
    def propose(self, b: int, window: int | None = None) -> None:
        """Draft a block for rows 0 … b−1 into drafts / probs / confidence (attending to positions < window), then
        decide how many drafts each row verifies (`schedule`). With a tree shape: the rows' trees, of which a row
        accepts at most `lengths` nodes (when the shape serves b rows)."""
        if self.uses_tree(b):
            hidden = self.draft.block_states(self.anchor[:b], self.start[:b], None, window)  # [b, γ, d]
            tree = build_tree(self.draft.draft, hidden, self.anchor[:b], self.tree)
            for buffer, value in zip(self.trees.rows(b).parts, tree.parts):
                buffer.copy_(value)
            self.schedule(b)
            return
        rows = None
        if not self.greedy(b):  # each row samples its drafts with its own settings and stream
            rows = self.rows
            rows.reseed(self.start[:b].tolist(), 1)
        out = self.draft.propose(self.anchor[:b], self.start[:b], None, self.config, None, window,
                                 confidence=self.rule != "none", row_sampling=rows)  # only a rule reads confidence
        self.drafts[:b].copy_(out.tokens)  # [b, γ]
        if out.probs is not None:
            self.probs[:b].copy_(out.probs)  # [b, γ, V]
        if out.confidence_logits is not None:
            self.confidence[:b].copy_(out.confidence_logits)  # [b, γ]
        self.schedule(b)

    def schedule(self, b: int) -> None:
        """lengths of rows 0 … b−1 from their budgets and the session's rule (a row without a request verifies
        nothing), and under a rule `width` = the longest + 1 (without one the host knows the width: no kernels)."""
        if self.rule == "none":  # every draft the budget allows, in two kernels
            torch.sub(self.budget[:b], 1, out=self.lengths[:b]).clamp_(0, self.gamma)  # [b]
            return
        has_confidence = self.draft is not None and self.draft.draft.confidence_head is not None
        rates = self.rates[b, : self.gamma + 1]
        lengths = scheduled_lengths(self.confidence[:b] if has_confidence else None, self.budget[:b] - 1,
                                    self.gamma, self.rule, self.threshold, self.temperatures, rates)
        self.lengths[:b] = lengths  # [b]
        self.width.copy_(lengths.max() + 1)

    def _verify_tree(self, b: int, window: int | None) -> None:
        """The tree verify: every slot of rows 0 … b−1's trees in one target pass, the deepest path matching the
        target's choices (greedy or sampled) accepted, its keys/values moved behind the anchor and its features
        extending the draft."""
        anchor, start, lengths, g = self.anchor[:b], self.start[:b], self.lengths[:b], self.gamma_max
        tree = self.trees.rows(b)
        logits, features = self.target.forward(tree.tokens, start, window=window, tree=tree)  # [b, T, V], [b, T, F]
        if self.greedy(b):
            choice = logits.argmax(-1)  # [b, T] the target's next token after each slot
        else:  # its own draw after each slot, independently (tree.py: the committed path is the target's sample)
            self.rows.reseed(start.tolist(), 2)
            choice = self.rows.sample(self.rows.probs(logits))  # [b, T]
        if tree_kernel.accept_usable(choice):  # one launch for what the torch ops below take ~25
            accepted, bonus, path, committed = tree_kernel.accept(*tree.parts, choice, lengths, g)
        else:
            accepted, bonus, best = accept_tree(tree, lengths, choice)  # [b] each
            path = accepted_path(tree, best, g)  # [b, γ] slots by depth
            committed = torch.cat([tree.tokens.gather(1, path), torch.zeros_like(anchor)[:, None]], dim=1)  # [b, γ+1]
            committed.scatter_(1, accepted[:, None], bonus[:, None])  # bonus right after the accepted nodes
        self.target.keep_path(start, path)
        if self.extend_stream is not None:
            self.extend_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.extend_stream):  # None (the CPU): the current stream
            slots = torch.cat([torch.zeros_like(path[:, :1]), path], dim=1)  # [b, γ+1] anchor, then the path
            self.draft.extend(features.gather(1, slots[:, :, None].expand(b, g + 1, features.shape[-1])), start)
        self._advance(b, accepted, bonus, committed)

    def _advance(self, b: int, accepted: torch.Tensor, bonus: torch.Tensor, committed: torch.Tensor) -> None:
        """Report [accepted, L, committed …] in `packed` and move rows 0 … b−1 past their commits."""
        anchor, start = self.anchor[:b], self.start[:b]
        self.packed[:b, 0] = accepted
        self.packed[:b, 1] = self.lengths[:b]
        self.packed[:b, 2 : 2 + committed.shape[1]] = committed
        step = (accepted + 1) * self.active[:b]  # [b] inactive rows stay where they are
        if self.extend_stream is not None:  # the extension read `start`: join it before start moves
            torch.cuda.current_stream().wait_stream(self.extend_stream)
        start.add_(step)
        self.budget[:b].sub_(step)
        anchor.copy_(torch.where(self.active[:b], bonus, anchor))

    @torch.inference_mode()
    def verify(self, b: int, t: int, window: int | None = None) -> None:
        """Verify [anchor, d_0 … d_{t−2}] for rows 0 … b−1 (attending to positions < window), accept, extend the
        draft, advance the rows. A tree engine verifies its trees (t is then the tree's width)."""
        if self.uses_tree(b) and t > 1:
            self._verify_tree(b, window)
            return
        anchor, start, lengths = self.anchor[:b], self.start[:b], self.lengths[:b]
        drafts = self.drafts[:b, : t - 1]  # [b, t−1]
        ids = torch.cat([anchor[:, None], drafts], dim=1)  # [b, t]
        logits, features = self.target.forward(ids, start, window=window)  # [b, t, V], [b, t, m·d]
        if self.draft is not None:  # on CUDA the context extension runs beside acceptance, on its own stream
            if self.extend_stream is not None:
                self.extend_stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.extend_stream):  # None (the CPU): the current stream
                self.draft.extend(features, start)
        if self.greedy(b):
            accepted, bonus = accept_greedy(drafts, lengths, logits)  # [b], [b]
        else:  # each row by its own settings and stream, the same draws whatever the round's width (t 1 too)
            self.rows.reseed(start.tolist(), 2)
            target_probs = self.rows.probs(logits)  # [b, t, V]
            draft_probs = (self.probs[:b, : t - 1] if self.probs is not None
                           else target_probs[:, :0])  # [b, t−1, V] (no draft: t is 1)
            accepted, bonus = accept_sampling(drafts, lengths, draft_probs, target_probs, None, self.rows,
                                              draws=self.gamma_max)
        committed = torch.cat([drafts, torch.zeros_like(anchor)[:, None]], dim=1)  # [b, t]
        committed.scatter_(1, accepted[:, None], bonus[:, None])  # bonus right after the accepted drafts
        self._advance(b, accepted, bonus, committed)
