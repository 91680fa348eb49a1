"""The DSpark heads: the low-rank Markov head (vanilla, gated, rnn) and the confidence head.

Each Markov head turns (previous token, slot hidden state, recurrent state) into a logit bias over the vocabulary.
`step` serves left-to-right decoding; `teacher_forced` serves training, where the previous tokens are known.
No sampling here: the engine decides which token becomes the next `prev`.
"""
from __future__ import annotations

import torch
from torch import nn

MarkovState = torch.Tensor | None


class MarkovHead(nn.Module):
    """Vanilla Markov head: bias_k = W2 · W1[prev_k]."""

    def __init__(self, vocab_size: int, rank: int, hidden_size: int):
        super().__init__()
        self.rank = rank
        self.markov_w1 = nn.Embedding(vocab_size, rank)
        self.markov_w2 = nn.Linear(rank, vocab_size, bias=False)

    def features(self, prev_ids: torch.Tensor) -> torch.Tensor:
        """prev_ids [...] -> W1[prev] [..., r]."""
        return self.markov_w1(prev_ids)

    def init_state(self, batch: int, device: torch.device, dtype: torch.dtype) -> MarkovState:
        return None

    def step(self, prev_ids: torch.Tensor, hidden: torch.Tensor, state: MarkovState) -> tuple[torch.Tensor, MarkovState]:
        """prev_ids [B], hidden [B, d] -> bias [B, V] and the next state."""
        mixed, state = self.step_features(prev_ids, hidden, state)
        return self.markov_w2(mixed), state

    def step_features(self, prev_ids: torch.Tensor, hidden: torch.Tensor,
                      state: MarkovState) -> tuple[torch.Tensor, MarkovState]:
        """prev_ids [B], hidden [B, d] -> the rank-r vector W2 maps to the bias [B, r], and the next state (a draft
        vocabulary maps it through its own rows of W2)."""
        return self._mix(self.features(prev_ids), hidden), state

    def _mix(self, emb: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        return emb

    def teacher_forced(self, prev_ids: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        """prev_ids [..., γ], hidden [..., γ, d] -> bias [..., γ, V], all slots in parallel."""
        return self.markov_w2(self._mix(self.features(prev_ids), hidden))


class GatedMarkovHead(MarkovHead):
    """Gated: g = σ(gate_proj([h_k ; W1[prev_k]])), bias_k = W2 · (g ⊙ W1[prev_k])."""

    def __init__(self, vocab_size: int, rank: int, hidden_size: int):
        super().__init__(vocab_size, rank, hidden_size)
        self.gate_proj = nn.Linear(hidden_size + rank, rank, bias=True)

    def _mix(self, emb: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        gate = torch.sigmoid(self.gate_proj(torch.cat([hidden, emb], dim=-1)))  # [..., r]
        return gate * emb


class RNNMarkovHead(MarkovHead):
    """RNN: z = [s ; W1[prev] ; h], [a_g | a_c | a_o] = joint_proj(z), bias = W2 · tanh(a_o),
    s' = σ(a_g)·s + (1 − σ(a_g))·tanh(a_c). The bias uses the state from before the update; s_0 = 0."""

    def __init__(self, vocab_size: int, rank: int, hidden_size: int):
        super().__init__(vocab_size, rank, hidden_size)
        self.joint_proj = nn.Linear(2 * rank + hidden_size, 3 * rank, bias=True)

    def init_state(self, batch: int, device: torch.device, dtype: torch.dtype) -> MarkovState:
        return torch.zeros(batch, self.rank, device=device, dtype=dtype)  # [B, r]

    def _cell(self, state: torch.Tensor, emb: torch.Tensor, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a_g, a_c, a_o = self.joint_proj(torch.cat([state, emb, hidden], dim=-1)).chunk(3, dim=-1)  # 3 × [..., r]
        gate = torch.sigmoid(a_g)
        return torch.tanh(a_o), gate * state + (1 - gate) * torch.tanh(a_c)

    def step_features(self, prev_ids: torch.Tensor, hidden: torch.Tensor,
                      state: MarkovState) -> tuple[torch.Tensor, MarkovState]:
        if state is None:
            state = self.init_state(prev_ids.shape[0], hidden.device, hidden.dtype)
        return self._cell(state, self.features(prev_ids), hidden)

    def teacher_forced(self, prev_ids: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        emb = self.features(prev_ids)  # [..., γ, r]
        state = torch.zeros_like(emb[..., 0, :])  # [..., r]
        outs = []
        for k in range(prev_ids.shape[-1]):
            out, state = self._cell(state, emb[..., k, :], hidden[..., k, :])
            outs.append(out)
        return self.markov_w2(torch.stack(outs, dim=-2))  # [..., γ, V]


MARKOV_HEADS = {"vanilla": MarkovHead, "gated": GatedMarkovHead, "rnn": RNNMarkovHead}


class ConfidenceHead(nn.Module):
    """c_k = proj([h_k ; W1[prev_k]]): a raw logit; σ(c_k) estimates P(slot k accepted | all earlier accepted)."""

    def __init__(self, hidden_size: int, markov_rank: int):
        super().__init__()
        self.proj = nn.Linear(hidden_size + markov_rank, 1, bias=True)

    def forward(self, hidden: torch.Tensor, markov_features: torch.Tensor | None) -> torch.Tensor:
        """hidden [..., d], markov_features [..., r] or None -> logits [...]."""
        x = hidden if markov_features is None else torch.cat([hidden, markov_features], dim=-1)
        return self.proj(x).squeeze(-1)
