"""Prompts, chat rendering, regeneration by the target (batched, resumable, counts add up) and calibration."""
from __future__ import annotations

import json

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from dspark.testbed.random_pair import tiny_target
from dspark.train.calibrate import expected_calibration_error, fit_sts, prefix_labels
from dspark.train.data import DataError, Prompt, load_prompts, read_examples, render_prompt
from dspark.train.regenerate import regenerate

WORDS = ["<pad>", "<eos>", "<unk>", "user", "assistant", "system", ":", "\n"] + [f"w{i}" for i in range(89)]


def word_tokenizer(chat: bool = True) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    if chat:
        fast.chat_template = ("{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} \n {% endfor %}"
                              "{% if add_generation_prompt %}assistant : {% endif %}")
    return fast


def test_jsonl_chat_sharegpt_plain_and_folder_prompts(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"id": "a", "messages": [{"role": "user", "content": "w1 w2"}, {"role": "assistant", "content": "w3"}]},
        {"conversations": [{"from": "human", "value": "w4"}, {"from": "gpt", "value": "w5"}]},
        {"prompt": "w6 w7"},
    ]) + "\n")
    prompts = load_prompts(path)
    assert prompts[0] == Prompt("a", messages=(("user", "w1 w2"),))  # the old answer is dropped: regenerated
    assert prompts[1].messages == (("user", "w4"),) and prompts[2].text == "w6 w7"
    tok = word_tokenizer()
    assert tok.convert_ids_to_tokens(render_prompt(prompts[0], tok)) == ["user", ":", "w1", "w2", "assistant", ":"]
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "m.py").write_text("".join(f"x{i} = {i}\n" for i in range(400)))
    folder = load_prompts(tmp_path / "code", chunk_chars=500)
    assert len(folder) >= 4 and all(p.text.startswith("x") and p.text.endswith("\n") for p in folder)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": [{"role": "user"}]}\n')
    with pytest.raises(DataError, match="bad.jsonl:1"):
        load_prompts(bad)


def test_regeneration_masks_only_the_response_resumes_and_counts_add_up(tmp_path):
    model = tiny_target("llama", vocab_size=len(WORDS), seed=0)
    model.generation_config.eos_token_id = None
    tok = word_tokenizer()
    prompts = [Prompt(str(i), messages=(("user", f"w{i} w{i + 1}"),)) for i in range(6)]
    prompts.append(Prompt("long", text=" ".join(["w1"] * 300)))
    out = tmp_path / "regen.jsonl"
    counts = regenerate(model, tok, prompts[:3], out, batch_size=2, max_new_tokens=5, max_length=64, progress=False)
    assert (counts.success, counts.skipped, counts.failed) == (3, 0, 0)
    with out.open("a") as f:
        f.write('{"id": "half-writ')  # a run killed mid-line
    counts = regenerate(model, tok, prompts, out, batch_size=4, max_new_tokens=5, max_length=64, progress=False)
    assert (counts.total, counts.success, counts.skipped, counts.failed) == (7, 3, 4, 0)  # 3 done + 1 too long
    examples = read_examples(out)
    assert sorted(e.id for e in examples) == ["0", "1", "2", "3", "4", "5"]
    for ex in examples:
        prompt_len = len(render_prompt(prompts[int(ex.id)], tok))
        response = list(ex.input_ids[prompt_len:])
        assert ex.loss_mask == (0,) * prompt_len + (1,) * len(response)
        ids = torch.tensor([ex.input_ids[:prompt_len]])
        greedy = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=5, do_sample=False,
                                pad_token_id=0, eos_token_id=tok.eos_token_id)[0, prompt_len:].tolist()
        assert response == greedy[: len(response)]  # the target's own greedy response…
        assert len(response) == 5 or response[-1] == tok.eos_token_id  # …up to its EOS (kept) or the limit


def test_static_engine_regeneration_gives_the_same_greedy_responses_as_hf_generate(tmp_path):
    model = tiny_target("llama", vocab_size=len(WORDS), seed=0)
    model.generation_config.eos_token_id = None
    tok = word_tokenizer()
    # some prompts end at once (EOS), some run to the budget, one is cut by max_length, one is too long
    prompts = [Prompt(str(i), text=" ".join(f"w{(i * 7 + k) % 89}" for k in range(1 + 3 * i))) for i in range(9)]
    prompts.append(Prompt("long", text=" ".join(["w1"] * 80)))
    hf = regenerate(model, tok, prompts, tmp_path / "hf.jsonl", batch_size=1, max_new_tokens=12, max_length=30,
                    progress=False)  # one prompt per batch: each gets its own room to max_length, as in the engine
    static = regenerate(model, tok, prompts[:4], tmp_path / "static.jsonl", max_new_tokens=12, max_length=30,
                        progress=False, static_batch=3)
    assert (static.success, static.skipped, static.failed) == (4, 0, 0)
    static = regenerate(model, tok, prompts, tmp_path / "static.jsonl", max_new_tokens=12, max_length=30,
                        progress=False, static_batch=3)  # resumes: 4 done, 1 too long, 5 new through 3 rows
    assert (hf.success, hf.skipped, hf.failed) == (9, 1, 0)
    assert (static.total, static.success, static.skipped, static.failed) == (10, 5, 5, 0)
    by_hf = {e.id: e for e in read_examples(tmp_path / "hf.jsonl")}
    by_static = {e.id: e for e in read_examples(tmp_path / "static.jsonl")}
    assert sorted(by_static) == sorted(by_hf) and len(by_hf) == 9
    assert all(by_static[k] == by_hf[k] for k in by_hf)
    lengths = {len(e.input_ids) for e in by_hf.values()}
    assert 30 in lengths  # a prompt whose response was cut by max_length is among them


def test_train_regenerate_cli_with_static_batch_writes_what_hf_batches_write(tmp_path, capsys):
    from dspark.cli import main

    model = tiny_target("llama", vocab_size=len(WORDS), seed=0)
    model.generation_config.eos_token_id = None
    model.save_pretrained(tmp_path / "target")
    word_tokenizer().save_pretrained(tmp_path / "target")
    (tmp_path / "p.jsonl").write_text("".join(json.dumps({"id": str(i), "prompt": f"w{i} w{i + 3}"}) + "\n"
                                              for i in range(5)))
    common = ["train", "regenerate", "--target", str(tmp_path / "target"), "--prompts", str(tmp_path / "p.jsonl"),
              "--max-new-tokens", "6", "--max-length", "64"]
    assert main([*common, "--out", str(tmp_path / "hf.jsonl")]) == 0
    assert main([*common, "--out", str(tmp_path / "static.jsonl"), "--static-batch", "2"]) == 0
    counts = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [(c["success"], c["failed"]) for c in counts] == [(5, 0), (5, 0)]
    hf, static = (sorted(read_examples(tmp_path / name), key=lambda e: e.id) for name in ("hf.jsonl", "static.jsonl"))
    assert static == hf and all(len(e.input_ids) == 2 + 6 for e in hf)


def test_regeneration_batches_by_token_budget_and_halves_a_batch_that_fails(tmp_path):
    model = tiny_target("llama", vocab_size=len(WORDS), seed=0)
    model.generation_config.eos_token_id = None
    tok = word_tokenizer()
    prompts = [Prompt(str(i), text=" ".join([f"w{i}"] * (1 + i))) for i in range(8)]  # widths 1 … 8
    seen: list[int] = []
    real_generate = model.generate

    def small_batches_only(*args, **kwargs):  # a device that runs out of memory above 2 rows
        seen.append(kwargs["input_ids"].shape[0])
        if kwargs["input_ids"].shape[0] > 2:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real_generate(*args, **kwargs)

    model.generate = small_batches_only
    out = tmp_path / "regen.jsonl"
    counts = regenerate(model, tok, prompts, out, batch_size=8, max_new_tokens=4, max_length=64, progress=False,
                        max_batch_tokens=40)
    assert (counts.success, counts.skipped, counts.failed) == (8, 0, 0)
    # budget 40 = rows × (widest + 4): widths 1–4 → 4 rows (4 × 8 = 32), then 5–7 (3 × 11 = 33), then 8 alone;
    # the 4- and 3-row batches fail and are halved (4 → 2 + 2, 3 → 1 + 2)
    assert seen == [4, 2, 2, 3, 1, 2, 1]
    by_id = {e.id: e for e in read_examples(out)}
    for prompt in prompts:  # halving changes no response: each is the prompt's own greedy continuation
        ids = render_prompt(prompt, tok)
        greedy = real_generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                               max_new_tokens=4, do_sample=False, pad_token_id=0)[0, len(ids):].tolist()
        assert list(by_id[prompt.id].input_ids[len(ids):]) == greedy


def test_regeneration_cut_short_has_done_a_random_sample_of_lengths_and_keeps_the_token_budget(tmp_path):
    model = tiny_target("llama", vocab_size=len(WORDS), seed=0)
    model.generation_config.eos_token_id = None
    tok = word_tokenizer()
    prompts = [Prompt(str(i), text=" ".join([f"w{i % 9}"] * (1 + i))) for i in range(16)]  # widths 1 … 16
    batches: list[list[int]] = []  # prompt widths (rows without padding) of each generate call, in order
    real_generate = model.generate

    def recording(*args, **kwargs):
        batches.append(kwargs["attention_mask"].sum(-1).tolist())
        return real_generate(*args, **kwargs)

    model.generate = recording
    counts = regenerate(model, tok, prompts, tmp_path / "regen.jsonl", batch_size=4, max_new_tokens=2,
                        max_length=64, progress=False, max_batch_tokens=60, sort_window=4)
    assert counts.success == 16
    widths = [w for batch in batches for w in batch]
    assert sorted(widths) == list(range(1, 17))
    windows = [widths[k: k + 4] for k in range(0, 16, 4)]
    assert all(w == sorted(w) for w in windows)  # sorted within each window of 4…
    assert windows[0] != [1, 2, 3, 4] and max(windows[0]) > 8  # …but the first window is not the shortest prompts
    assert all(len(b) * (max(b) + 2) <= 60 or len(b) == 1 for b in batches)  # the budget holds across windows


def test_sts_lowers_calibration_error_of_an_overconfident_head():
    gen = torch.Generator().manual_seed(0)
    rounds, slots = 4000, 5
    true_logit = torch.randn(rounds, slots, generator=gen) * 1.5  # true conditional acceptance logits
    accepted_slot = torch.rand(rounds, slots, generator=gen) < torch.sigmoid(true_logit)
    accepted = accepted_slot.long().cumprod(-1).sum(-1)  # prefix length
    reported = true_logit * 3.0  # an overconfident head: right ranking, too sharp
    cal = fit_sts(reported, accepted)
    assert all(2.0 < t < 4.5 for t in cal.sts_temperatures[:3])  # later slots are rarely reached: weakly determined
    assert sum(cal.ece_after) < 0.5 * sum(cal.ece_before)
    labels = prefix_labels(torch.tensor([0, 2]), 3)
    assert labels.tolist() == [[0, 0, 0], [1, 1, 0]]
    assert expected_calibration_error(torch.tensor([0.05, 0.95]), torch.tensor([0.0, 1.0])) == pytest.approx(0.05)


def test_train_calibrate_cli_fits_temperatures_on_full_blocks_and_writes_them_beside_the_draft(tmp_path, capsys):
    from dspark.cli import main
    from dspark.formats.native import save_draft
    from dspark.testbed import successor_pair
    from dspark.train.calibrate import load_temperatures

    model, tokenizer, draft = successor_pair.load()  # partial acceptance: blocks end at every slot
    model.save_pretrained(tmp_path / "target")
    tokenizer.save_pretrained(tmp_path / "target")
    save_draft(draft, tmp_path / "draft")
    (tmp_path / "held.jsonl").write_text("".join(json.dumps({"prompt": p}) + "\n" for p in ("abc", "kl", "pqrs")))
    args = ["train", "calibrate", "--target", str(tmp_path / "target"), "--draft", str(tmp_path / "draft"),
            "--prompts", str(tmp_path / "held.jsonl")]
    assert main([*args, "--max-new-tokens", "40"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    slots = draft.config.num_draft_tokens
    assert report["calibration"] == str(tmp_path / "draft" / "calibration.json") and report["rounds"] >= 10
    assert len(report["sts_temperatures"]) == len(report["ece_before"]) == len(report["ece_after"]) == slots
    assert report["ece_after"][0] <= report["ece_before"][0]  # slot 0's grid holds T = 1: never worse there
    assert load_temperatures(tmp_path / "draft").tolist() == pytest.approx(report["sts_temperatures"])
    (tmp_path / "draft" / "calibration.json").unlink()
    assert main([*args, "--max-new-tokens", "1"]) == 2  # one new token: no round verifies a whole block
    assert "no full-block rounds" in capsys.readouterr().err
    assert not (tmp_path / "draft" / "calibration.json").exists()


def test_sampled_regeneration_is_seeded_and_a_prompt_that_always_fails_is_counted_failed_then_retried(tmp_path):
    model = tiny_target("llama", vocab_size=len(WORDS), seed=0)
    model.generation_config.eos_token_id = None
    tok = word_tokenizer()
    prompts = [Prompt(str(i), text=f"w{i} w{i + 1}") for i in range(6)]
    poisoned = render_prompt(prompts[3], tok)
    real_generate = model.generate

    def fails_on_prompt_3(*args, **kwargs):  # e.g. a prompt that overflows something on the device, every time
        rows = kwargs["input_ids"].tolist()
        if any(row[len(row) - len(poisoned):] == poisoned for row in rows):
            raise RuntimeError("simulated failure")
        return real_generate(*args, **kwargs)

    model.generate = fails_on_prompt_3
    sampled = {}
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        counts = regenerate(model, tok, prompts, tmp_path / f"{name}.jsonl", batch_size=4, max_new_tokens=12,
                            max_length=64, temperature=1.0, seed=seed, progress=False)
        assert (counts.total, counts.success, counts.skipped, counts.failed) == (6, 5, 0, 1)
        sampled[name] = {e.id: e.input_ids for e in read_examples(tmp_path / f"{name}.jsonl")}
    assert sorted(sampled["a"]) == ["0", "1", "2", "4", "5"]  # the failed prompt is not written…
    assert sampled["a"] == sampled["b"] and sampled["a"] != sampled["c"]  # same seed, same samples
    greedy = regenerate(model, tok, prompts, tmp_path / "g.jsonl", batch_size=4, max_new_tokens=12, max_length=64,
                        progress=False)
    assert {e.id: e.input_ids for e in read_examples(tmp_path / "g.jsonl")} != sampled["a"]
    assert (greedy.success, greedy.failed) == (5, 1)
    model.generate = real_generate
    again = regenerate(model, tok, prompts, tmp_path / "a.jsonl", batch_size=4, max_new_tokens=12, max_length=64,
                       temperature=1.0, progress=False)
    assert (again.success, again.skipped, again.failed) == (1, 5, 0)  # …so a resumed run retries it alone
    static = regenerate(model, tok, prompts, tmp_path / "s.jsonl", max_new_tokens=12, max_length=64, temperature=1.0,
                        progress=False, static_batch=4)
    widths = {p.id: len(render_prompt(p, tok)) for p in prompts}
    assert static.success == 6
    assert all(len(e.input_ids) == widths[e.id] + 12  # every new token, or up to a sampled EOS (kept)
               or (len(e.input_ids) < widths[e.id] + 12 and e.input_ids[-1] == tok.eos_token_id)
               for e in read_examples(tmp_path / "s.jsonl"))
