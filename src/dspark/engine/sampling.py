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

    def probs(self, logits: torch.Tensor, rows: list[int] | None = None, nucleus: bool = True) -> torch.Tensor:
        """logits [B, ..., V] of rows `rows` (default 0 … B−1) -> each one's processed distribution [B, ..., V] fp32
        (one-hot at the argmax for a greedy row); rows of the same settings are processed together. `nucleus` False:
        without the top-p cut (`proposal_config`: the draft's proposals), every row in one pass."""
        indices = list(rows if rows is not None else range(logits.shape[0]))
        if not nucleus:
            return self._proposal_probs(logits, [self.configs[row] for row in indices])
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

    @staticmethod
    def _proposal_probs(logits: torch.Tensor, configs: list[GenerationConfig]) -> torch.Tensor:
        """Temperature and top-k for each row at once (one top-k for all sampled rows); greedy rows one-hot."""
        device, vocab = logits.device, logits.shape[-1]
        shape = (-1,) + (1,) * (logits.dim() - 1)
        temperature = torch.tensor([c.temperature if not c.greedy else 1.0 for c in configs], device=device)
        scores = logits.float() / temperature.view(shape)  # [B, ..., V]
        ks = [c.top_k if not c.greedy and 0 < c.top_k < vocab else 0 for c in configs]
        if any(ks):
            values = torch.topk(scores, max(ks), dim=-1).values  # [B, ..., k_max] descending
            at = torch.tensor([max(k, 1) - 1 for k in ks], device=device).view(shape).expand(*scores.shape[:-1], 1)
            kth = values.gather(-1, at)  # [B, ..., 1] each row's k-th largest score
            kth = kth.masked_fill(torch.tensor([k == 0 for k in ks], device=device).view(shape), float("-inf"))
            scores = scores.masked_fill(scores < kth, float("-inf"))
        probs = scores.softmax(-1)  # [B, ..., V]
        greedy = [i for i, c in enumerate(configs) if c.greedy]
        if greedy:  # one-hot at the argmax
            at = torch.tensor(greedy, device=device)
            one_hot = torch.zeros((len(greedy), *logits.shape[1:]), dtype=torch.float32, device=device)
            probs.index_copy_(0, at, one_hot.scatter_(-1, logits.index_select(0, at).argmax(-1, keepdim=True), 1.0))
        return probs

    def sample(self, probs: torch.Tensor, rows: list[int] | None = None) -> torch.Tensor:
        """probs [B, ..., V] of rows `rows` (default 0 … B−1) -> one token per row and position [B, ...], by inverse
        CDF on uniforms each row draws from its own stream."""
        indices = rows if rows is not None else range(probs.shape[0])
        count = probs[0, ..., 0].numel()
        u = torch.stack([torch.rand(count, generator=self.generators[row], device=probs.device) for row in indices])
        cdf = probs.float().cumsum(-1)  # [B, ..., V]
        u = u.reshape(*probs.shape[:-1], 1) * cdf[..., -1:]  # [B, ..., 1] scaled to the total mass
        return torch.searchsorted(cdf, u, right=True)[..., 0].clamp_(max=probs.shape[-1] - 1)

    def uniform(self, rows: int, count: int, device: torch.device) -> torch.Tensor:
        """[rows, count] uniforms for rows 0 … rows−1, each from its own stream."""
        return torch.stack([torch.rand(count, generator=self.generators[row], device=device) for row in range(rows)])
