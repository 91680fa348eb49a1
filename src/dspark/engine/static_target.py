"""The target over a preallocated (static) KV cache: B sequences at once, each at its own position.

A functional forward over the HF model's own submodules (embedding, decoder layers' norms / projections / MLP, final
norm, LM head, and the model's own rotary embedding so RoPE scaling matches; Q/K/V and gate/up run as one GEMM each,
see fused_layers.py), reporting logits and the features a DSpark draft reads, as `Target.forward` does. On CUDA, steps
of a few tokens per row (verify, decoding) run the elementwise chains and the attention as Triton kernels
(layer_kernels.py, cache_attention.py); long prefills run the same elementwise kernels with SDPA for the attention,
the CPU the torch ops. Keys/values of
the new tokens are written into cache rows at their absolute positions with no host sync; entries past a row's
position are masked, so a rejected draft's stale entries need no cropping: the next round overwrites them. Supports
Llama, Qwen3, Qwen2 and Mistral targets, with full or sliding-window attention per layer (the window is a mask over
the full cache: nothing is evicted). It does not sample, decide acceptance or track which rows are in use.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from dspark.engine import cache_attention, layer_kernels
from dspark.engine.fused_layers import fuse_projections, projected_heads
from dspark.engine.tree import TreeDrafts, ancestor_slots
from dspark.model.rope import rotate, signed_sin
from dspark.model.target import Target

SUPPORTED_TARGETS = ("LlamaForCausalLM", "Qwen3ForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM")


def check_supported(model: torch.nn.Module) -> None:
    """Raise a clear error unless the fast path can run this HF model."""
    name = type(model).__name__
    if name not in SUPPORTED_TARGETS:
        raise NotImplementedError(
            f"the static backend runs {', '.join(SUPPORTED_TARGETS)} targets, not {name} (the engine runs it "
            f"through the Hugging Face backend)")
    rope_type = str(getattr(model.model.rotary_emb, "rope_type", "default"))
    if "dynamic" in rope_type or "longrope" in rope_type:
        raise NotImplementedError(f"the static backend does not support {rope_type!r} RoPE (its frequencies change "
                                  f"with the sequence length)")
    layer_windows(model)


def layer_windows(model: torch.nn.Module) -> tuple[int | None, ...]:
    """Each decoder layer's sliding window (a key is visible when position − key < window), None for full attention:
    from `config.layer_types` when the config has them, else `config.sliding_window` for every layer (Mistral)."""
    cfg = model.config
    count = int(cfg.num_hidden_layers)
    types = getattr(cfg, "layer_types", None)
    if not types:
        return (getattr(cfg, "sliding_window", None),) * count
    unknown = sorted(set(types) - {"full_attention", "sliding_attention"})
    if unknown:
        raise NotImplementedError(f"the static backend supports full and sliding-window attention layers, not "
                                  f"{unknown}")
    return tuple(int(cfg.sliding_window) if t == "sliding_attention" else None for t in types)


def is_supported(model: torch.nn.Module) -> bool:
    """Whether the static backend can run this HF model (`backend.backend_for` asks this)."""
    try:
        check_supported(model)
    except NotImplementedError:
        return False
    return True


def rms_norm(norm: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """An HF Llama-style RMSNorm module (Llama, Qwen3, Qwen2, Mistral) or the draft's applied as one fused op (HF's
    forward is eight elementwise kernels)."""
    return F.rms_norm(x, norm.weight.shape, norm.weight, norm_eps(norm))


def norm_eps(norm: torch.nn.Module) -> float:
    """An RMSNorm module's epsilon: HF's `variance_epsilon` or the draft's `eps`."""
    return norm.variance_epsilon if hasattr(norm, "variance_epsilon") else norm.eps


def aligned(length: int) -> int:
    """Cache length rounded up to a multiple of 16 (what fused attention kernels want of a mask's rows)."""
    return -(-length // 16) * 16


def attention_bias(visible: torch.Tensor, groups: int, dtype: torch.dtype) -> torch.Tensor:
    """Boolean visibility [B, 1, T, L] -> additive bias [B, 1, G·T, L] (0 / −inf) for `grouped_attention`,
    built once per forward instead of once per layer."""
    b, _, t, length = visible.shape
    grouped = visible[:, :, None].expand(b, 1, groups, t, length).reshape(b, 1, groups * t, length)
    return torch.zeros(grouped.shape, dtype=dtype, device=visible.device).masked_fill_(~grouped, float("-inf"))


def causal_bias(positions: torch.Tensor, window: int, groups: int, dtype: torch.dtype,
                sliding: int | None = None) -> torch.Tensor:
    """positions [B, T] -> bias [B, 1, G·T, window]: a query sees cache positions up to its own (and, with a
    sliding window, only the last `sliding` of them)."""
    keys = torch.arange(window, device=positions.device)[None, None, :]  # [1, 1, L]
    visible = keys <= positions[:, :, None]  # [B, T, L]
    if sliding is not None:
        visible &= keys > positions[:, :, None] - sliding
    return attention_bias(visible[:, None], groups, dtype)


def position_tables(cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A rotary embedding's cos / sin [L, D] for positions 0 … L−1 -> (cos, signed sin) [L, D]: built once per engine
    and read by position every step (`layer_kernels.rope_write` reads rows in place; the torch path indexes them),
    so no step computes a cos or a sin. Each position's values are the ones a per-step call computes: θ_p = p·f is a
    single fp32 product whatever the batch."""
    return cos.contiguous(), signed_sin(sin).contiguous()


def rope_tables(cos: torch.Tensor, sin_signed: torch.Tensor, rotated: int, kept: int) -> tuple[torch.Tensor,
                                                                                             torch.Tensor]:
    """cos, sin_signed [B, T, D] -> [B, T, rotated + kept, D]: the first `rotated` heads turn, the last `kept` heads
    get cos 1 and sin 0 (x·1 + roll(x)·0 = x exactly), so one `rotate` covers a fused q/k/v tensor. Built once per
    forward and shared by every layer."""
    b, t, d = cos.shape
    ones, zeros = cos.new_ones(b, t, kept, d), cos.new_zeros(b, t, kept, d)
    return (torch.cat([cos[:, :, None].expand(b, t, rotated, d), ones], dim=2),
            torch.cat([sin_signed[:, :, None].expand(b, t, rotated, d), zeros], dim=2))


def write_rows(cache: torch.Tensor, rows: torch.Tensor | None, positions: torch.Tensor, new: torch.Tensor) -> None:
    """Write new [B, H, T, D] into cache [B_max, H, L, D] at rows [B] (None: rows 0 … B−1), positions [B, T]."""
    b, h, t, d = new.shape
    if rows is None:  # the round's rows: a scatter into a view (graph-safe, no gather)
        cache[:b].scatter_(2, positions[:, None, :, None].expand(b, h, t, d), new.to(cache.dtype))
    else:
        cache[rows[:, None], :, positions] = new.transpose(1, 2).to(cache.dtype)  # [B, T, H, D] slots


def read_rows(cache: torch.Tensor, rows: torch.Tensor | None, b: int, window: int) -> torch.Tensor:
    """Positions < window of cache rows [B_max, H, L, D] -> [B, H, window, D] (a view for rows 0 … B−1)."""
    return cache[:b, :, :window] if rows is None else cache[:, :, :window].index_select(0, rows)


def grouped_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, bias: torch.Tensor,
                      scale: float | None = None) -> torch.Tensor:
    """GQA without expanding the cache: q [B, H, T, D] as [B, H_kv, G·T, D] (query head h reads KV head h // G)
    against keys/values [B, H_kv, L, D] with bias [B, 1, G·T, L] -> [B, H, T, D]. Any SDPA kernel that takes a
    mask can run it (enable_gqa would force the math kernel when a mask is given)."""
    b, h, t, d = q.shape
    kv = keys.shape[1]
    out = F.scaled_dot_product_attention(q.reshape(b, kv, h // kv * t, d), keys, values, attn_mask=bias, scale=scale)
    return out.reshape(b, h, t, d)


class StaticTarget:
    """Per-layer caches [B_max, 2·H_kv, L_max, D] in the model dtype (keys, then values; `keys` / `values` are views),
    and a forward that fills and reads them."""

    supports_tree = True  # tree verification (the `tree` forward and `keep_path`)

    def __init__(self, target: Target, max_batch: int, max_length: int):
        model = target.model
        check_supported(model)
        self.target, self.model = target, model
        self.layer_ids = target.layer_ids
        self.windows = layer_windows(model)  # per layer: sliding window or None
        self.backbone = model.model
        cfg = model.config
        attn = self.backbone.layers[0].self_attn
        self.heads, self.kv_heads = int(cfg.num_attention_heads), int(cfg.num_key_value_heads)
        self.head_dim = int(attn.head_dim)
        self.max_batch, self.max_length = max_batch, aligned(max_length)
        self.fused = [fuse_projections(layer) for layer in self.backbone.layers]  # 2 GEMMs where HF runs 5
        self.silu = getattr(cfg, "hidden_act", "silu") == "silu"  # layer_kernels.silu_mul's activation
        weight = target.lm_head.weight
        self.offsets = torch.arange(self.max_length, device=weight.device)  # [L] a step's positions past its start
        cos, sin = self.backbone.rotary_emb(weight[:0], self.offsets[None])  # [1, L, D] each, the model dtype
        self.rope = position_tables(cos[0], sin[0])  # [L, D] each
        shape = (max_batch, 2 * self.kv_heads, self.max_length, self.head_dim)
        # one cache per layer, keys in heads 0 … H_kv−1 and values after them: one write per layer and token block;
        # all layers in one tensor, so a tree's accepted path moves in one gather and one scatter (`keep_path`)
        self.cache = torch.zeros((len(self.backbone.layers), *shape), dtype=weight.dtype, device=weight.device)
        self.kv = list(self.cache.unbind(0))  # [B_max, 2·H_kv, L_max, D] views, one per layer
        self.keys = [cache[:, : self.kv_heads] for cache in self.kv]  # [B_max, H_kv, L_max, D] views
        self.values = [cache[:, self.kv_heads :] for cache in self.kv]

    @property
    def device(self) -> torch.device:
        return self.keys[0].device

    def copy_rows(self, sources: torch.Tensor, destinations: torch.Tensor) -> None:
        """Move sequences' caches to other rows (compacting the batch): every layer and row in one gather and one
        scatter."""
        self.cache.index_copy_(1, destinations, self.cache.index_select(1, sources))  # [layers, k, 2·H_kv, L, D]

    def keep_path(self, start: torch.Tensor, path: torch.Tensor) -> None:
        """After a tree verify of rows 0 … B−1 at start [B]: move the accepted path's keys/values, tree slots path
        [B, γ] (relative to start, by depth 1 … γ), to positions start+1 … start+γ in every layer (slots past the
        accepted depth hold their own depth: they stay where they are, masked until overwritten)."""
        b, gamma = path.shape
        layers, _, heads, _, dim = self.cache.shape
        source = (start[:, None] + path)[None, :, None, :, None].expand(layers, b, heads, gamma, dim)
        target = (start[:, None] + 1 + self.offsets[:gamma])[None, :, None, :, None].expand(layers, b, heads, gamma,
                                                                                             dim)
        rows = self.cache[:, :b]  # [layers, B, 2·H_kv, L, D]
        rows.scatter_(3, target, rows.gather(3, source))  # the gather is a copy: sources never move before read

    def _attention(self, index: int, h: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor],
                   positions: torch.Tensor, rows: torch.Tensor | None, bias: torch.Tensor | None,
                   window: int, fast: bool,
                   tree: tuple[torch.Tensor, torch.Tensor, torch.Tensor | None] | None = None) -> torch.Tensor:
        """Normed states h [B, T, d] ([1, N, d] when packed) -> attention output of the same shape; writes the
        block's keys/values into the layer's cache. fast: norms, rotation and the cache write in one kernel (rope =
        cos, sin_signed tables [L, D]), then the attention kernel (bias None) or SDPA with bias [B, 1, G·T, W]; else
        the torch ops and SDPA (rope = tables [B, T, H + 2·H_kv, D] that turn q and k and leave v as it is: cos 1,
        sin 0 on v's heads). tree (fast only): (start [B], rotary positions [B, T], ancestor slots [B, T, T] for the
        attention kernel, or None under a bias) of a tree verify, whose slots are written at `positions` but turned
        by their depth and masked by `bias` or read along their paths by the kernel."""
        attn, fused = self.backbone.layers[index].self_attn, self.fused[index]
        b, t = positions.shape
        heads, kv, dim = self.heads, self.kv_heads, self.head_dim
        qwen3 = getattr(attn, "q_norm", None) is not None  # per-head norms of q and k before RoPE
        if fast:  # attention reads q in place and the cache
            qkv = projected_heads(h, fused.qkv_weight, fused.qkv_bias, heads, kv, dim)  # [B, T, H+2·H_kv, D]
            norms = (attn.q_norm.weight, attn.k_norm.weight, norm_eps(attn.q_norm)) if qwen3 else None
            q = layer_kernels.rope_write(qkv, heads, kv, *rope, self.kv[index], rows, positions, norms,
                                         rotary=None if tree is None else tree[1])  # [B, T, H, D]
            if bias is None:
                last, paths = (positions, None) if tree is None else (tree[1], (tree[0], tree[2]))
                out = cache_attention.attend(q, self.kv[index], kv, last, rows, window, attn.scaling,
                                             self.windows[index], tree=paths)  # [B, T, H, D]
            else:  # too many queries per row for the attention kernel's tile (a prefill)
                keys = read_rows(self.keys[index], rows, b, window)  # [B, H_kv, W, D]
                values = read_rows(self.values[index], rows, b, window)
                out = grouped_attention(q.transpose(1, 2), keys, values, bias, attn.scaling).transpose(1, 2)
            return attn.o_proj(out.reshape(b, t, heads * dim))
        norms = {"q_norm": lambda y: rms_norm(attn.q_norm, y), "k_norm": lambda y: rms_norm(attn.k_norm, y)}
        qkv = projected_heads(h, fused.qkv_weight, fused.qkv_bias, heads, kv, dim, **(norms if qwen3 else {}))
        qkv = rotate(qkv, *rope)  # [B, T, H + 2·H_kv, D]
        write_rows(self.kv[index], rows, positions, qkv[:, :, heads:].transpose(1, 2))  # [B, 2·H_kv, T, D]
        keys = read_rows(self.keys[index], rows, b, window)  # [B, H_kv, W, D]
        values = read_rows(self.values[index], rows, b, window)
        out = grouped_attention(qkv[:, :, :heads].transpose(1, 2), keys, values, bias, attn.scaling)  # [B, H, T, D]
        return attn.o_proj(out.transpose(1, 2).reshape(b, t, heads * dim))

    def _mlp(self, index: int, h: torch.Tensor, fast: bool) -> torch.Tensor:
        """The layer's gated MLP with gate and up in one GEMM (and SiLU · up in one kernel when fast)."""
        mlp, fused = self.backbone.layers[index].mlp, self.fused[index]
        gate_up = F.linear(h, fused.gate_up_weight, fused.gate_up_bias)  # [B, T, 2·I]
        return mlp.down_proj(gated(gate_up, mlp.act_fn, fast and self.silu))

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, start: torch.Tensor, rows: torch.Tensor | None = None,
                logits_at: torch.Tensor | None = None, window: int | None = None,
                tree: TreeDrafts | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """ids [B, T] at positions start_b … start_b+T−1 of cache rows `rows` [B] (None: rows 0 … B−1) ->
        logits [B, T, V] in the model's dtype (only column logits_at_b's [B, 1, V] when given; an argmax needs no
        fp32 copy, and sampling makes its own) and features [B, T, m·d].
        Attention reads cache positions < window (default: all); every position a query sees must lie below it.
        `tree`: ids are a tree's slots (tree.py), slot t
        written at start_b + t, turned as position start_b + depth and attending to the context and its ancestors."""
        b, t = ids.shape
        if tree is not None and (rows is not None or any(w is not None for w in self.windows)):
            raise ValueError("a tree verify runs on rows 0 … B−1 of a full-attention target")
        positions = start[:, None] + self.offsets[:t]  # [B, T]
        x = self.backbone.embed_tokens(ids)  # [B, T, d]
        # the layer kernels serve every step on CUDA; the attention kernel only steps of few queries per row (a
        # prefill attends through SDPA with a bias, its other steps still run as kernels)
        fast = layer_kernels.usable(x, self.head_dim)
        rope = self.rope  # cos, signed sin [L, D], read by position
        width = min(window or self.max_length, self.max_length)
        rotary = positions if tree is None else start[:, None] + tree.depth  # [B, T] the positions RoPE turns by
        tree_args = None
        if kernels_serve(x, self.heads, self.kv_heads, self.head_dim, t):
            biases = dict.fromkeys(self.windows)  # the attention kernel masks by position (a tree: by its paths)
            if tree is not None:
                tree_args = (start, rotary, ancestor_slots(tree))  # [B], [B, T], [B, T, T]
        elif tree is not None and fast:  # the layer kernels turn q and k by depth; SDPA masks by the tree
            tree_args = (start, rotary, None)
        else:
            if not fast:
                rope = rope_tables(rope[0][rotary], rope[1][rotary], self.heads + self.kv_heads, self.kv_heads)
            groups = self.heads // self.kv_heads
            if tree is not None:
                biases = {None: attention_bias(tree_visibility(start, tree.visible, width)[:, None], groups, x.dtype)}
            else:
                biases = {w: causal_bias(positions, width, groups, x.dtype, w)
                          for w in set(self.windows)}  # [B, 1, G·T, W] per distinct window, built once per forward
        features = [x] if -1 in self.layer_ids else []
        layers = self.backbone.layers
        h = rms_norm(layers[0].input_layernorm, x)
        for index, layer in enumerate(layers):
            attended = self._attention(index, h, rope, positions, rows, biases[self.windows[index]], width, fast,
                                       tree_args)
            x, h = added_norm(x, attended, layer.post_attention_layernorm, fast)
            following = layers[index + 1].input_layernorm if index + 1 < len(layers) else self.backbone.norm
            x, h = added_norm(x, self._mlp(index, h, fast), following, fast)  # h: the next layer's input
            if index in self.layer_ids:
                features.append(x)
        if logits_at is not None:
            h = h.gather(1, logits_at[:, None, None].expand(b, 1, h.shape[-1]))  # [B, 1, d]
        return self.model.lm_head(h), torch.cat(features, dim=-1)  # [B, T, V] in the model's dtype, [B, T, m·d]


def tree_visibility(start: torch.Tensor, visible: torch.Tensor, window: int) -> torch.Tensor:
    """A tree verify's masks: start [B], slot visibility [B, T, T] -> [B, T, window] bool: every context position
    (< start) and the tree slots (at start + j) that visible allows."""
    b, t, _ = visible.shape
    keys = torch.arange(window, device=start.device)[None, :] - start[:, None]  # [B, W] key slot (< 0: context)
    inside = (keys >= 0) & (keys < t)  # [B, W]
    seen = visible.gather(2, keys.clamp(0, t - 1)[:, None, :].expand(b, t, window))  # [B, T, W]
    return (keys < 0)[:, None, :] | (inside[:, None, :] & seen)


def kernels_serve(x: torch.Tensor, heads: int, kv_heads: int, head_dim: int, t: int) -> bool:
    """Whether a step of t new positions per row runs all the Triton kernels, attention included (CUDA, few queries
    per row: verify, decoding and draft steps), rather than SDPA for the attention (prefills whose G·T queries per
    row exceed the attention tile) or the torch ops throughout (CPU)."""
    return cache_attention.usable(x, head_dim, heads // kv_heads * t) and layer_kernels.usable(x, head_dim)


def gated(gate_up: torch.Tensor, act: Callable[[torch.Tensor], torch.Tensor], fast: bool) -> torch.Tensor:
    """A fused [gate | up] projection [..., 2·I] -> act(gate) · up [..., I]; one kernel when fast (act is SiLU)."""
    if fast:
        return layer_kernels.silu_mul(gate_up)
    gate, up = gate_up.chunk(2, dim=-1)  # [..., I] each
    return act(gate) * up


def added_norm(x: torch.Tensor, delta: torch.Tensor, norm: torch.nn.Module, fast: bool) -> tuple[torch.Tensor,
                                                                                               torch.Tensor]:
    """The residual add and the next RMSNorm: (x + δ, norm(x + δ)), in one kernel when fast."""
    if fast:
        return layer_kernels.add_rms_norm(x, delta, norm.weight, norm_eps(norm))
    x = x + delta
    return x, rms_norm(norm, x)
