"""The batched engine's stepping session: requests added mid-flight, each with its own budget and EOS ids, and one
cancelled, decode token for token as the batch-1 engine does (tokens and τ statistics); a cancel frees its row."""
from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from dspark import GenerationConfig, Target, generate
from dspark.engine.batch import BatchEngine
from dspark.testbed.successor_pair import EOS_ID, build_pair

PROMPTS = {"a": list(b"hello #"), "b": list(b"abc 0"), "c": list(b"xyz 123 456 789"), "d": list(b"The quick"),
           "e": list(b"a~"), "f": list(b"mn"), "g": list(b"q")}  # "a~" ends at its first token (the EOS)
BUDGETS = {"a": 30, "b": 24, "c": 25, "d": 17, "e": 5, "f": 40, "g": 12}


@pytest.fixture(scope="module")
def pair():
    model, draft = build_pair()
    return Target(model, draft.config.target_layer_ids), draft


@pytest.mark.slow
def test_session_steps_equal_batch1_greedy_with_mid_flight_requests_per_row_budgets_and_a_cancel(pair):
    target, draft = pair
    engine = BatchEngine(target, draft, max_batch=3, max_length=96)
    session = engine.open(GenerationConfig(eos_token_ids=(EOS_ID,)))
    eos = {rid: (EOS_ID,) for rid in PROMPTS} | {"f": ()}  # "f" ignores the EOS: it runs to its budget
    got: dict[str, list[int]] = {rid: [] for rid in PROMPTS}
    finished: set[str] = set()

    def step() -> None:
        for rid, tokens, done in session.step():
            assert rid not in finished
            got[rid] += tokens
            if done:
                finished.add(rid)

    for rid in ("a", "b"):
        session.add(rid, PROMPTS[rid], BUDGETS[rid], eos[rid])
    step()
    step()
    assert session.live == 2 and len(got["a"]) > 2  # first token + two rounds of commits
    for rid in ("e", "c", "d", "f", "g"):  # more than the free rows: some wait in the queue
        session.add(rid, PROMPTS[rid], BUDGETS[rid], eos[rid])
    step()
    assert session.live == 3 and session.queued == 3  # "e" ended at its first token and gave its row to "c"
    assert "e" in finished and got["e"] == [EOS_ID] and got["c"] and not got["d"]
    partial = session.cancel("c")
    assert partial.tokens == got["c"] and session.live == 2
    with pytest.raises(KeyError):
        session.recorder("c")  # a cancelled request is forgotten
    step()
    assert got["d"] and session.queued == 2  # the cancelled row went to "d" at the next step
    while not session.idle:
        step()
    assert finished == set(PROMPTS) - {"c"}
    accepted = 0
    for rid, prompt in PROMPTS.items():
        config = GenerationConfig(max_new_tokens=BUDGETS[rid], eos_token_ids=eos[rid])
        expected = generate(target, draft, prompt, config)
        if rid == "c":
            assert 0 < len(got[rid]) < len(expected.tokens) and got[rid] == expected.tokens[: len(got[rid])]
            continue
        result = session.release(rid)
        assert got[rid] == result.tokens == expected.tokens
        assert result.stats == expected.stats  # same rounds, proposed / accepted counts and token counts
        accepted += sum(result.stats.accepted_counts)
    assert len(got["f"]) == 40 and EOS_ID in got["f"][:-1] and accepted > 20  # multi-token commits really happened


def test_session_requests_are_checked_and_a_newer_session_ends_the_older(pair):
    target, draft = pair
    engine = BatchEngine(target, draft, max_batch=2, max_length=40)
    session = engine.open()
    session.add(1, [5, 6], 0)  # a zero budget finishes at once, reported by the next step
    assert session.step() == [(1, [], True)] and session.release(1).tokens == []
    with pytest.raises(ValueError, match="larger max_length"):
        session.add(2, list(range(30)), 8)
    session.add(3, [7, 8], 4)
    with pytest.raises(ValueError, match="already in this session"):
        session.add(3, [7, 8], 4)
    with pytest.raises(ValueError, match="still running"):
        session.release(3)
    newer = engine.open()
    with pytest.raises(RuntimeError, match="newer engine.open"):
        session.step()
    assert newer.idle and newer.step() == []


class _Ops(TorchDispatchMode):
    """Records the aten operators run inside it."""

    def __init__(self):
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def test_retiring_a_row_fills_its_buffers_in_place_and_copies_no_host_scalar_to_the_device(pair):
    target, draft = pair
    engine = BatchEngine(target, draft, max_batch=2, max_length=64)
    engine.round.active.fill_(True)
    engine.round.budget.fill_(9)
    engine.round.start.fill_(5)
    with _Ops() as ops:
        engine.round.retire(1)
    assert "copy_" not in ops.names and ops.names.count("fill_") == 3  # a copy from the host waits for the device
    assert engine.round.active.tolist() == [True, False]
    assert engine.round.budget.tolist() == [9, 0] and engine.round.start.tolist() == [5, 0]


def test_a_waiting_request_takes_a_free_row_and_rows_move_only_when_that_shrinks_the_row_bucket(pair):
    target, draft = pair
    engine = BatchEngine(target, draft, max_batch=4, max_length=96, pad_to_buckets=True)  # buckets 1, 2, 4
    moves: list[tuple[list[int], list[int], int, int]] = []  # (sources, destinations, live rows, rows the round ran)
    move_rows = engine.round.move_rows

    def watched(sources: list[int], destinations: list[int]) -> None:
        session = engine._session
        assert not session.queued  # while requests wait, a free row is theirs: nothing moves
        moves.append((sources, destinations, session.live, session._span))
        move_rows(sources, destinations)

    engine.round.move_rows = watched
    order = ["a", "b", "c", "d", "e", "f", "g"]
    config = GenerationConfig(max_new_tokens=40, eos_token_ids=(EOS_ID,))
    results = engine.generate([PROMPTS[r] for r in order], config)
    assert moves  # the last requests drain from 4 rows to 1: the bucket shrinks and rows move down
    for sources, destinations, live, span in moves:
        assert max(destinations) < live <= min(sources) and engine.width_rows(live) < engine.width_rows(span)
    for rid, result in zip(order, results):
        assert result.tokens == generate(target, draft, PROMPTS[rid], config).tokens


def test_moving_rows_at_once_gives_each_destination_its_sources_caches_and_state_and_retires_the_sources(pair):
    target, draft = pair
    engine = BatchEngine(target, draft, max_batch=4, max_length=64)
    r = engine.round
    for buffer in (r.anchor, r.start, r.budget, r.drafts, r.lengths, r.target.cache, r.draft.kv[0]):
        buffer.copy_(torch.arange(buffer.numel()).reshape(buffer.shape).to(buffer.dtype) + 1)
    r.active.fill_(True)
    before = {name: getattr(r, name).clone() for name in ("anchor", "start", "budget", "drafts", "lengths")}
    cache, context = r.target.cache.clone(), r.draft.kv[0].clone()
    r.move_rows([3, 2], [0, 1])
    for name, old in before.items():
        now = getattr(r, name)
        assert torch.equal(now[0], old[3]) and torch.equal(now[1], old[2]), name
    assert torch.equal(r.target.cache[:, 0], cache[:, 3]) and torch.equal(r.target.cache[:, 1], cache[:, 2])
    assert torch.equal(r.draft.kv[0][0], context[3]) and torch.equal(r.draft.kv[0][1], context[2])
    assert r.active.tolist() == [True, True, False, False] and r.budget[2:].tolist() == [0, 0]
