"""The API key comes from exactly one of --api-key, --api-key-file PATH or $DSPARK_API_KEY; two at once, an empty
key or an unreadable file are refused with one clear message that never holds the key."""
from __future__ import annotations

import json

import httpx
import pytest
from serve_support import running_server, single_thread  # noqa: F401

from dspark.cli import main
from dspark.serve.auth import API_KEY_ENV, resolve_api_key
from dspark.serve.model_source import ServeSetupError

SECRET = "s3cret-key-Zq9"


def test_each_source_alone_gives_the_key(tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text(f"  {SECRET}\n")
    assert resolve_api_key(SECRET, None, {}) == SECRET
    assert resolve_api_key(None, str(key_file), {}) == SECRET
    assert resolve_api_key(None, None, {API_KEY_ENV: SECRET}) == SECRET
    assert resolve_api_key(None, None, {"OTHER": SECRET}) is None


@pytest.mark.parametrize("flag, use_file, env, says", [
    (SECRET, True, {}, "given 2 ways (--api-key, --api-key-file)"),
    (SECRET, False, {API_KEY_ENV: SECRET}, "given 2 ways (--api-key, $DSPARK_API_KEY)"),
    (None, True, {API_KEY_ENV: SECRET}, "given 2 ways (--api-key-file, $DSPARK_API_KEY)"),
    (SECRET, True, {API_KEY_ENV: SECRET}, "given 3 ways"),
    ("  ", False, {}, "--api-key is empty"),
    (None, False, {API_KEY_ENV: ""}, "$DSPARK_API_KEY is empty"),
])
def test_two_sources_or_an_empty_key_are_refused_without_showing_the_key(tmp_path, flag, use_file, env, says):
    key_file = tmp_path / "key"
    key_file.write_text(SECRET)
    with pytest.raises(ServeSetupError) as caught:
        resolve_api_key(flag, str(key_file) if use_file else None, env)
    assert says in str(caught.value) and SECRET not in str(caught.value)


def test_an_empty_or_missing_key_file_is_refused(tmp_path):
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(ServeSetupError, match="--api-key-file is empty"):
        resolve_api_key(None, str(empty), {})
    with pytest.raises(ServeSetupError, match="cannot read it"):
        resolve_api_key(None, str(tmp_path / "missing"), {})


def test_the_command_line_refuses_two_keys_with_exit_2_and_never_prints_the_key(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(API_KEY_ENV, SECRET)
    key_file = tmp_path / "key"
    key_file.write_text(SECRET)
    assert main(["serve", "--dry-run", "--api-key-file", str(key_file)]) == 2
    out = capsys.readouterr()
    assert "give it one way only" in out.err and SECRET not in out.out + out.err


@pytest.mark.slow
def test_a_key_from_the_file_guards_the_server(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    key_file = tmp_path / "key"
    key_file.write_text(SECRET + "\n")
    assert main(["serve", "--dry-run", "--json", "--api-key-file", str(key_file)]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["api_key_required"] is True and SECRET not in out.out + out.err
    with running_server(api_key=resolve_api_key(None, str(key_file), {})) as url:
        assert httpx.get(f"{url}/v1/models").status_code == 401
        assert httpx.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {SECRET}"}).status_code == 200
