"""`dspark serve` from the command line: --dry-run, clear errors (exit 2), local --target/--draft folders
(tokenizer from the target folder, plain chat fallback without a template), and a real `dspark serve` process."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from serve_support import client, running_server, single_thread  # noqa: F401

from dspark.cli import main
from dspark.cli.serve_default import choose_default, load_default
from dspark.formats.native import save_draft
from dspark.serve.model_source import load_served_model
from dspark.serve.prompts import render_plain_chat
from dspark.serve.schemas import ChatMessage
from dspark.testbed.random_pair import draft_config_for, random_draft, tiny_target
from dspark.testbed.successor_pair import build_pair, build_tokenizer

pytestmark = pytest.mark.slow  # in the full suite only (`pytest -m "not slow"` skips it)

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """The tiny pair saved as an HF target folder (tokenizer without chat template) + its draft folder, and a
    draft for another target."""
    root = tmp_path_factory.mktemp("serve-cli")
    target, draft = build_pair(seed=1)
    tokenizer = build_tokenizer()
    tokenizer.chat_template = None
    target.save_pretrained(root / "target")
    tokenizer.save_pretrained(root / "target")
    save_draft(draft, root / "draft")
    other = tiny_target("qwen3", vocab_size=260, hidden_size=32, num_layers=4)
    save_draft(random_draft(draft_config_for(other)), root / "other-draft")
    return root


def dry_run(capsys, *flags: str) -> tuple[int, str, str]:
    code = main(["serve", "--dry-run", "--json", *flags])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_dry_run_describes_the_embedded_default(capsys):
    code, out, _ = dry_run(capsys)
    default = load_served_model(default=load_default)
    assert code == 0
    assert json.loads(out) == {
        "model": choose_default().name, "url": "http://127.0.0.1:8000", "context_length": default.context_length,
        "draft": {"mode": default.draft.config.mode, "block_size": default.draft.config.block_size,
                  "num_speculative_tokens": default.num_spec_tokens,
                  "target_layer_ids": list(default.draft.config.target_layer_ids),
                  "draft_vocab": default.draft.config.vocab_size, "tree": None},
        "max_concurrency": 4, "api_key_required": False}
    code, out, _ = dry_run(capsys, "--tree-nodes", "12", "--tree-beam", "3", "--tree-max-rows", "2",
                           "--tree-score-temperature", "0.5")
    assert code == 0 and json.loads(out)["draft"]["tree"] == {"nodes": 12, "beam": 3, "max_rows": 2,
                                                              "score_temperature": 0.5}


@pytest.mark.parametrize("flags, says", [
    (["--draft", "somewhere"], "--draft needs --target"),
    (["--target", "/no/such/model"], "not a Hugging Face model folder"),
    (["--port", "70000"], "not a TCP port"),
    (["--max-concurrency", "0"], "--max-concurrency must be >= 1"),
    (["--max-model-len", "1"], "--max-model-len must be >= 2"),
    (["--max-drafts", "99"], "exceeds the"),
    (["--api-key", " "], "--api-key is empty"),
    (["--threads", "0"], "--threads must be >= 1"),
    (["--idle-timeout", "0"], "--idle-timeout must be a positive number"),
    (["--algorithm1", "--confidence-threshold", "0.3"], "choose one"),
    (["--tree-nodes", "8", "--tree-score-temperature", "0"], "--tree-score-temperature must be > 0"),
    (["--tree-nodes", "8", "--max-drafts", "3"], "whole block"),
    (["--tree-nodes", "999"], "candidates"),
])
def test_bad_flags_exit_2_with_one_clear_message(capsys, flags, says):
    code, out, err = dry_run(capsys, *flags)
    assert code == 2 and out == ""
    assert err.startswith("dspark serve: error: ") and says in err and "Traceback" not in err


def test_local_target_and_draft_folders_are_served(capsys, folders):
    code, out, _ = dry_run(capsys, "--target", str(folders / "target"), "--draft", str(folders / "draft"),
                           "--served-model-name", "local")
    assert code == 0 and json.loads(out)["model"] == "local" and json.loads(out)["draft"]["block_size"] == 4


def test_a_draft_vocabulary_is_served_losslessly_and_needs_counts_and_a_draft(capsys, folders, tmp_path):
    import shutil

    import torch

    from dspark.formats.token_counts import TOKEN_COUNTS_NAME, save_token_counts

    target = str(folders / "target")
    code, _, err = dry_run(capsys, "--target", target, "--draft", str(folders / "draft"), "--draft-vocab", "64")
    assert code == 2 and "dspark train token-counts" in err
    code, _, err = dry_run(capsys, "--target", target, "--draft-vocab", "64")
    assert code == 2 and "give --draft too" in err
    counted = tmp_path / "draft"
    shutil.copytree(folders / "draft", counted)
    save_token_counts(torch.arange(260) % 7, counted / TOKEN_COUNTS_NAME)  # ties: the lowest ids rank first
    code, out, _ = dry_run(capsys, "--target", target, "--draft", str(counted), "--draft-vocab", "64")
    assert code == 0 and json.loads(out)["draft"]["draft_vocab"] == 64
    texts = []
    for vocab in (0, 64):
        served = load_served_model(target, str(counted), draft_vocab=vocab)
        assert (served.draft.draft_vocab is None) == (vocab == 0)
        with running_server(served) as url:
            texts.append(client(url).completions.create(model="target", prompt="Hello", max_tokens=12,
                                                        temperature=0).choices[0].text)
    assert texts[0] == texts[1] and len(texts[0]) > 0  # greedy output does not depend on what the draft may propose


def test_a_draft_built_for_another_target_is_refused_at_startup(capsys, folders):
    code, _, err = dry_run(capsys, "--target", str(folders / "target"), "--draft", str(folders / "other-draft"))
    assert code == 2 and "hidden size" in err


def test_chat_without_a_chat_template_uses_the_plain_fallback(folders):
    served = load_served_model(str(folders / "target"), str(folders / "draft"))
    assert served.name == "target" and served.tokenizer.chat_template is None
    messages = [{"role": "user", "content": "Hi"}]
    expected = served.tokenizer(render_plain_chat([ChatMessage(**messages[0])]))["input_ids"]
    with running_server(served) as url:
        response = client(url).chat.completions.create(model="target", messages=messages, max_tokens=5,
                                                       temperature=0)
    assert response.usage.prompt_tokens == len(expected)
    assert response.usage.completion_tokens == 5
    assert response.metrics["speculative_decoding"]["num_spec_tokens"] == 4


def test_dspark_serve_process_prints_its_url_serves_with_the_key_and_stops_on_sigint():
    default_name = choose_default().name
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    process = subprocess.Popen(
        [sys.executable, "-m", "dspark.cli", "serve", "--port", "0", "--api-key", "k3y", "--log-level", "warning",
         "--threads", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = process.stdout.readline()
        url = re.search(r"on (http://127\.0\.0\.1:\d+) ", line).group(1)
        assert default_name in line and "drafts per round" in line
        httpx.get(f"{url}/health", timeout=30)  # ready once the socket answers
        assert httpx.get(f"{url}/v1/models").status_code == 401
        answer = client(url, api_key="k3y").completions.create(model=default_name, prompt="Hello",
                                                              max_tokens=3, temperature=0)
        assert answer.usage.completion_tokens == 3 and answer.model == default_name
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
