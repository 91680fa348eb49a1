"""speculators (PyPI, vLLM project) loads our speculators export with its own DSpark model and computes the same
logits as dspark on the same inputs.

Run in the peers venv (setup_peers.sh): `$PEERS_VENV/bin/python benchmarks/integration/check_speculators.py`.
For each conformance draft (vanilla / gated / rnn Markov heads, trained by DeepSpec): `dspark export --layout
speculators`, then `speculators.models.dspark.DSparkDraftModel.from_pretrained` on that folder (it reloads the
embedding / LM head from the verifier recorded in the export). Its training forward (`_backbone_forward`: its
anchors, block mask and positions, fed the target's hidden states at *its* aux layer ids, i.e. HF
`hidden_states[aux]`) plus its Markov and confidence heads give draft logits that are compared with dspark's
`draft_forward` on the same anchors. Nothing is mocked. Prints a table, then one JSON line.
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, dspark_cli, record  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "conformance" / "deepspec"
VARIANTS = ("vanilla", "gated", "rnn")
ATOL = 5e-5  # the conformance fixtures' tolerance for logit-scale tensors (float32)


def _their_outputs(folder: Path, target, input_ids, loss_mask, anchors_wanted: int):
    from speculators.models.dspark import DSparkDraftModel
    from speculators.models.dspark.config import DSparkSpeculatorConfig

    config = DSparkSpeculatorConfig.from_pretrained(folder)
    config.transformer_layer_config._attn_implementation = "sdpa"  # CPU: no flex-attention compile
    model = DSparkDraftModel.from_pretrained(folder, config=config).eval()
    aux = list(config.aux_hidden_state_layer_ids)
    with torch.no_grad():
        out = target(input_ids, output_hidden_states=True)
        features = torch.cat([out.hidden_states[a] for a in aux], dim=-1)  # vLLM base: input of layer a
        torch.manual_seed(0)
        hidden, base, _, _, indices = model._backbone_forward(
            features, input_ids, loss_mask, out.hidden_states[-1], torch.zeros_like(input_ids),
            max_anchors=anchors_wanted)
        gamma = model.block_size
        blocks = input_ids[0, indices].view(-1, gamma)  # prev tokens: the block's own tokens (sample_from_anchor)
        hidden_blocks = hidden.view(-1, gamma, hidden.shape[-1])
        prev_emb = model.markov_head.prev_embeddings(blocks)
        bias = model.markov_head.block_bias(prev_token_ids=blocks, hidden_states=hidden_blocks, prev_emb=prev_emb)
        logits = base.view(-1, gamma, base.shape[-1]) + bias
        confidence = model.confidence_head(torch.cat([hidden_blocks, prev_emb], dim=-1))
    anchors = indices.view(-1, gamma)[:, 0]
    return model, aux, anchors, logits, confidence


def _our_outputs(folder: Path, target, input_ids, loss_mask, anchors):
    from dspark import Target, load_draft
    from dspark.model.block_forward import draft_forward
    from dspark.model.blocks import build_blocks

    draft = load_draft(folder)
    wrapped = Target(target, draft.config.target_layer_ids)
    if draft.embed_tokens is None:
        draft.tie_embeddings(wrapped.embed_tokens, wrapped.lm_head)
    with torch.no_grad():
        features = wrapped.forward(input_ids).features
        keep = torch.ones_like(anchors, dtype=torch.bool)[None]
        blocks = build_blocks(input_ids, loss_mask, anchors[None], keep, draft.config.block_size,
                              draft.config.mask_token_id)
        outputs = draft_forward(draft, features, blocks)
    return outputs.logits[0], outputs.confidence_logits[0]


def check_variant(variant: str, work: Path, target) -> dict:
    from safetensors.torch import load_file

    export = work / f"{variant}-speculators"
    dspark_cli("export", str(FIXTURES / variant / "draft"), str(export), "--layout", "speculators",
            "--target", str(FIXTURES / "target"), "--force")
    inputs = load_file(FIXTURES / variant / "inputs.safetensors")
    input_ids, loss_mask = inputs["input_ids"][:1], inputs["loss_mask"][:1]
    model, aux, anchors, theirs, their_conf = _their_outputs(export, target, input_ids, loss_mask, 8)
    valid = anchors < input_ids.shape[1] - model.block_size  # speculators pads with invalid anchors
    anchors, theirs, their_conf = anchors[valid], theirs[valid], their_conf[valid]
    ours, our_conf = _our_outputs(FIXTURES / variant / "draft", target, input_ids, loss_mask, anchors)
    logit_diff = float((ours - theirs).abs().max())
    conf_diff = float((our_conf - their_conf).abs().max())
    same_argmax = bool(torch.equal(ours.argmax(-1), theirs.argmax(-1)))
    return {"variant": variant, "speculators_class": type(model).__name__, "aux_hidden_state_layer_ids": aux,
            "anchors": anchors.tolist(), "max_abs_logit_diff": logit_diff, "max_abs_confidence_diff": conf_diff,
            "same_argmax": same_argmax, "passed": logit_diff <= ATOL and conf_diff <= ATOL and same_argmax}


def main() -> int:
    from importlib.metadata import version

    from rich.console import Console
    from rich.table import Table
    from transformers import Qwen3ForCausalLM

    torch.set_num_threads(2)
    began = time.time()
    target = Qwen3ForCausalLM.from_pretrained(FIXTURES / "target", dtype=torch.float32).eval()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [check_variant(v, Path(tmp), target) for v in VARIANTS]
    table = Table(title="speculators DSparkDraftModel vs dspark on the same anchors (float32)")
    for column in ("variant", "aux ids", "anchors", "max |Δ logit|", "max |Δ confidence|", "argmax", "result"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["variant"], str(row["aux_hidden_state_layer_ids"]), str(len(row["anchors"])),
                      f"{row['max_abs_logit_diff']:.2e}", f"{row['max_abs_confidence_diff']:.2e}",
                      "same" if row["same_argmax"] else "DIFFERENT", "pass" if row["passed"] else "FAIL")
    Console().print(table)
    summary = {"check": "speculators", "speculators": version("speculators"), "torch": torch.__version__,
               "transformers": version("transformers"), "tolerance": ATOL, "variants": rows,
               "passed": all(r["passed"] for r in rows), "seconds": round(time.time() - began, 1)}
    record("speculators", summary)
    print(json.dumps(summary))
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
