"""Turning logits into the distribution we sample from (temperature, top-k, top-p) and drawing from it, seeded.

The target's logits get the request's full processing; the draft proposes with its temperature and top-k but no
top-p cut (`proposal_config`): rejection sampling is exact for any proposal distribution, as long as it reads the
one each draft was drawn from. Greedy decoding (temperature 0) does not come through here: it is an argmax.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from dspark.config import GenerationConfig


def processed_probs(logits: torch.Tensor, config: GenerationConfig) -> torch.Tensor:
    """logits [..., V] -> probabilities [..., V] (fp32) after temperature, top-k and top-p."""
    scores = logits.float() / config.temperature  # [..., V]
    vocab = scores.shape[-1]
    if 0 < config.top_k < vocab:
        kth = torch.topk(scores, config.top_k, dim=-1).values[..., -1:]  # [..., 1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if config.top_p < 1.0:
        sorted_scores, order = torch.sort(scores, dim=-1, descending=True)
        sorted_probs = sorted_scores.softmax(-1)
        # drop a token when the mass strictly before it already reaches top_p (the top token always stays)
        drop_sorted = (sorted_probs.cumsum(-1) - sorted_probs) >= config.top_p
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        scores = scores.masked_fill(drop, float("-inf"))
    return scores.softmax(-1)


def proposal_config(config: GenerationConfig) -> GenerationConfig:
    """The settings the draft proposes with: the request's temperature and top-k, without the top-p cut. Speculative
    sampling is exact for any proposal distribution q (acceptance min(1, p/q) and the residual read the q each draft
    was drawn from; the target's p keeps every setting), and skipping the nucleus spares a sort of the vocabulary at
    every drafted slot for about the same acceptance."""
    return config if config.top_p >= 1.0 else replace(config, top_p=1.0)


def inverse_cdf(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """probs [..., V] and uniforms [...] in [0, 1) -> the token each uniform picks [...] (inverse CDF)."""
    cdf = probs.float().cumsum(-1)  # [..., V]
    u = uniforms[..., None] * cdf[..., -1:]  # [..., 1] scaled to the total mass
    return torch.searchsorted(cdf, u, right=True)[..., 0].clamp_(max=probs.shape[-1] - 1)


def sample(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """probs [..., V] -> one token id per row [...]."""
    flat = probs.reshape(-1, probs.shape[-1])
    return torch.multinomial(flat, 1, generator=generator).reshape(probs.shape[:-1])


class RowSampling:
    """Each row's own sampling settings and random stream, so one batch decodes requests with different temperature,
    top-p, top-k and seed side by side.

    A row's stream is re-seeded at every step from (its seed, its position, the step's phase), so what a row draws
    depends on its own request alone: not on the other rows, the round's shared width, or a block drafted again after
    an admission. Greedy rows (temperature 0) get one-hot distributions at their argmax, which rejection sampling
    turns into exactly the greedy rule (accept while equal, the bonus is the argmax). Rows are sampled one at a time
    (a loop over the batch): sampled rounds run eagerly."""

    def __init__(self, max_batch: int, device: torch.device):
        self.configs = [GenerationConfig()] * max_batch
        self.seeds = [0] * max_batch
        self.generators = [torch.Generator(device=device) for _ in range(max_batch)]

    def set(self, row: int, config: GenerationConfig, seed: int) -> None:
        self.configs[row], self.seeds[row] = config, seed

    def move(self, source: int, destination: int) -> None:
        self.configs[destination], self.seeds[destination] = self.configs[source], self.seeds[source]
        self.configs[source] = GenerationConfig()

    def greedy(self, b: int) -> bool:
        """Whether rows 0 … b−1 are all greedy (the round can take the greedy path, and CUDA graphs)."""
        return all(config.greedy for config in self.configs[:b])

    def reseed(self, positions: list[int], phase: int, rows: list[int] | None = None) -> None:
        """Re-seed each row for a step at its position (`rows`: which rows; default 0 … len(positions)−1; `phase`:
        which step of the round)."""
        for row, position in zip(rows if rows is not None else range(len(positions)), positions):
            self.generators[row].manual_seed(hash((self.seeds[row], position, phase)) & (2**63 - 1))

    def probs(self, logits: torch.Tensor, rows: list[int] | None = None) -> torch.Tensor:
        """logits [B, ..., V] of rows `rows` (default 0 … B−1) -> each one's processed distribution [B, ..., V] fp32
        (one-hot at the argmax for a greedy row); rows of the same settings are processed together."""
        indices = list(rows if rows is not None else range(logits.shape[0]))
        configs = [self.configs[row] for row in indices]
        groups: dict[tuple, list[int]] = {}
        for i, config in enumerate(configs):
            key = ("greedy",) if config.greedy else (config.temperature, config.top_p, config.top_k)
            groups.setdefault(key, []).append(i)
        out = torch.empty(logits.shape, dtype=torch.float32, device=logits.device)
        for key, members in groups.items():
            at = torch.tensor(members, device=logits.device)
            part = logits.index_select(0, at)  # [n, ..., V]
            if key == ("greedy",):
                probs = torch.zeros(part.shape, dtype=torch.float32, device=logits.device)
                probs.scatter_(-1, part.argmax(-1, keepdim=True), 1.0)
            else:
                probs = processed_probs(part, configs[members[0]])
            out.index_copy_(0, at, probs)
        return out

    def sample(self, probs: torch.Tensor, rows: list[int] | None = None) -> torch.Tensor:
        """probs [B, ..., V] of rows `rows` (default 0 … B−1) -> one token per row and position [B, ...], by inverse
        CDF on uniforms each row draws from its own stream."""
        indices = rows if rows is not None else range(probs.shape[0])
        count = probs[0, ..., 0].numel()
        u = torch.stack([torch.rand(count, generator=self.generators[row], device=probs.device) for row in indices])
        return inverse_cdf(probs, u.reshape(probs.shape[:-1]))

    def uniform(self, rows: int, count: int, device: torch.device) -> torch.Tensor:
        """[rows, count] uniforms for rows 0 … rows−1, each from its own stream."""
        return torch.stack([torch.rand(count, generator=self.generators[row], device=device) for row in range(rows)])


class ProposalSampler:
    """The draft's sampling in one round for rows 0 … n−1 of a `RowSampling`: each row's proposal settings
    (`proposal_config`: temperature and top-k) as tensors built once for the round's γ slots, and each row's γ
    uniforms drawn at once from its stream (re-seeded for the propose step before this is built). Every slot then
    processes all rows in one pass: one top-k for every sampled row, greedy rows one-hot at their argmax."""

    def __init__(self, rows: RowSampling, n: int, slots: int, vocab: int, device: torch.device):
        configs = [proposal_config(c) for c in rows.configs[:n]]
        greedy = [c.greedy for c in configs]
        self.greedy = torch.tensor(greedy, device=device)[:, None] if any(greedy) else None  # [n, 1]
        self.temperature = torch.tensor([1.0 if c.greedy else c.temperature for c in configs], device=device)[:, None]
        ks = [c.top_k if not c.greedy and 0 < c.top_k < vocab else 0 for c in configs]
        self.top_k = max(ks)
        self.kth = torch.tensor([max(k, 1) - 1 for k in ks], device=device)[:, None]  # [n, 1] index of the k-th
        self.no_cut = torch.tensor([k == 0 for k in ks], device=device)[:, None]  # [n, 1]
        self.uniforms = rows.uniform(n, slots, device)  # [n, γ]

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """logits [n, V] -> each row's proposal distribution [n, V] fp32."""
        scores = logits.float() / self.temperature  # [n, V]
        if self.top_k:
            kth = torch.topk(scores, self.top_k, dim=-1).values.gather(-1, self.kth)  # [n, 1] each row's k-th largest
            scores = scores.masked_fill(scores < kth.masked_fill(self.no_cut, float("-inf")), float("-inf"))
        probs = scores.softmax(-1)  # [n, V]
        if self.greedy is None:  # every row samples: no one-hot to build
            return probs
        one_hot = torch.zeros_like(scores).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)  # [n, V]
        return torch.where(self.greedy, one_hot, probs)

    def sample(self, probs: torch.Tensor, slot: int) -> torch.Tensor:
        """probs [n, V] -> one token per row [n], from each row's uniform for this slot."""
        return inverse_cdf(probs, self.uniforms[:, slot])
