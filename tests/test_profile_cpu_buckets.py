"""benchmarks/cpu/profile_cpu.py: each matrix product lands in its bucket whichever operand order the CPU layout
chose (row-major x @ Wᵀ, column-major, or the weight-first W @ xᵀ)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "cpu"))
from profile_cpu import bucket  # noqa: E402


def test_heads_and_layers_of_target_and_draft_are_told_apart_in_either_operand_order():
    vocab, block = 49152, 7
    assert bucket([[7, 576], [576, 49152]], vocab, block) == "draft LM head"
    assert bucket([[49152, 576], [576, 7]], vocab, block) == "draft LM head"  # W @ xᵀ
    assert bucket([[8, 576], [576, 49152]], vocab, block) == "target LM head"
    assert bucket([[49152, 576], [576, 1]], vocab, block) == "target LM head"
    assert bucket([[7, 576], [576, 1536]], vocab, block) == "draft layers"
    assert bucket([[71, 1536], [1536, 576]], vocab, block) == "target layers"  # a prefill
