"""Reading launch commands out of shell text: aliases, continuations, environment, several nodes,
here-documents; and the rule catalogue: every rule is tested firing and quiet, and cites its source."""
from __future__ import annotations

import pytest
import test_doctor_live
import test_doctor_rules_checkpoint
import test_doctor_rules_engines
import test_doctor_rules_sglang

from dspark.deploy.cmdline import CommandError, heredoc_files, parse_command, parse_commands, parse_int
from dspark.deploy.doctor import all_rules
from dspark.deploy.serving_view import view_of


def test_sglang_aliases_and_continuations_normalise_to_canonical_flags() -> None:
    text = """# launch
export SGLANG_RAGGED_VERIFY_MODE=compact
CUDA_VISIBLE_DEVICES=0,1 python3 -m sglang.launch_server \\
  --model moonshotai/Kimi-K3 --tp 8 --decode-context-parallel-size=4 \\
  --speculative-draft-model RadixArk/Kimi-K3-DSpark --speculative_algorithm dspark \\
  --chunked-prefill-size -1 --cuda-graph-max-bs 32 --enable-metrics  # trailing comment
"""
    [cmd] = parse_command(text)
    assert cmd.engine == "sglang"
    assert cmd.env == {"SGLANG_RAGGED_VERIFY_MODE": "compact", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert (cmd.get("model-path"), cmd.get("tp-size"), cmd.get("dcp-size")) == ("moonshotai/Kimi-K3", "8", "4")
    assert cmd.get_int("chunked-prefill-size") == -1 and cmd.get("cuda-graph-max-bs-decode") == "32"
    view = view_of(cmd)
    assert (view.method, view.draft_path, view.tp, view.dcp) == ("dspark", "RadixArk/Kimi-K3-DSpark", 8, 4)
    assert cmd.switch("enable-metrics") is True


def test_vllm_short_forms_negations_and_json_config() -> None:
    [cmd] = parse_command("vllm serve Qwen/Qwen3-8B -tp 2 -dcp 2 --no-enable-chunked-prefill "
                          "--max-model-len 128k --speculative-config '{\"model\": \"z/Qwen3-8B-DSpark\", "
                          "\"num_speculative_tokens\": 7}'")
    view = view_of(cmd)
    assert view.target == "Qwen/Qwen3-8B" and (view.tp, view.dcp) == (2, 2)
    assert view.method == "dspark"  # inferred from the draft's name, as vllm/config/speculative.py does
    assert cmd.switch("enable-chunked-prefill") is False and view.context_length == 128_000


def test_multi_node_script_yields_one_command_per_node_and_skips_other_lines() -> None:
    text = "ray start --head\n" + "\n".join(
        f"python -m sglang.launch_server --model-path m --nnodes 2 --node-rank {r} && echo done" for r in (0, 1))
    assert [c.get("node-rank") for c in parse_commands(text)] == ["0", "1"]


def test_heredoc_bodies_are_files_not_commands() -> None:
    text = "cat > opts.yaml <<'EOF'\nspeculative_config: {decoding_type: DSpark}\nrm -rf it's fine\nEOF\n" \
           "trtllm-llmapi-launch trtllm-serve serve m --tp_size 8 --config opts.yaml\n"
    [cmd] = parse_command(text)
    assert cmd.engine == "trtllm" and cmd.get("extra-llm-api-options") == "opts.yaml" and cmd.get("tp-size") == "8"
    assert heredoc_files(text) == {"opts.yaml": "speculative_config: {decoding_type: DSpark}\nrm -rf it's fine\n"}


@pytest.mark.parametrize("text,message", [
    ("echo nothing here", "no SGLang"),
    ("vllm serve a\ntrtllm-serve b", "several engines"),
    ("vllm serve 'unterminated", "cannot split"),
])
def test_unreadable_text_raises_command_error(text, message) -> None:
    with pytest.raises(CommandError, match=message):
        parse_command(text)


def test_integer_values_accept_size_suffixes_and_reject_junk() -> None:
    assert (parse_int("1M", "x"), parse_int("128k", "x"), parse_int("-1", "x")) == (1_048_576, 128_000, -1)
    with pytest.raises(CommandError, match="expects an integer"):
        parse_int("8.5", "--tp-size")


def test_every_rule_has_a_firing_and_a_quiet_test() -> None:
    modules = (test_doctor_rules_sglang, test_doctor_rules_engines, test_doctor_rules_checkpoint)
    fired = {c.rule for m in modules for c in m.FIRING}
    quiet = {c.rule for m in modules for c in m.QUIET}
    live = {r.id for r in all_rules() if r.id.startswith("LV-")}
    live_tests = " ".join(name for name in dir(test_doctor_live) if name.startswith("test_"))
    assert live_tests  # live rules are exercised one by one in test_doctor_live.py
    ids = {r.id for r in all_rules()}
    assert ids - live <= fired and ids - live <= quiet
    assert len(ids) == len(all_rules())


def test_every_rule_cites_the_engine_behaviour_it_relies_on() -> None:
    markers = (".py", "docs/", "API reference", "#", "CLI reference")
    for rule in all_rules():
        assert any(m in rule.why for m in markers), rule.id
        assert rule.severity in ("error", "warning", "info")
