"""Text streaming pieces: stop strings over arbitrary chunking, incremental detokenization of multi-byte text,
and the plain chat fallback."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dspark.testbed.successor_pair import build_tokenizer
from dspark.serve.detokenize import IncrementalDetokenizer
from dspark.serve.prompts import render_plain_chat
from dspark.serve.schemas import ChatMessage
from dspark.serve.stop_strings import StopStringMatcher

TOKENIZER = build_tokenizer()


def run_matcher(pieces: list[str], stops: list[str]) -> tuple[list[str], str | None]:
    matcher = StopStringMatcher(stops)
    out = [matcher.push(piece) for piece in pieces]
    out.append(matcher.flush())
    return out, matcher.matched


def test_text_is_held_back_only_while_it_could_start_a_stop_string():
    matcher = StopStringMatcher(["STOP"])
    assert matcher.push("abcS") == "abc"
    assert matcher.push("T") == ""
    assert matcher.push("x") == "STx"  # "STx" can no longer become "STOP"
    assert matcher.push("ST") == ""
    assert matcher.flush() == "ST" and matcher.matched is None


def test_a_stop_string_split_across_pieces_cuts_before_it_and_drops_the_rest():
    out, matched = run_matcher(["Hel", "lo wo", "rld", "more"], ["o w"])
    assert "".join(out) == "Hell" and matched == "o w"
    assert out[2:] == ["", "", ""]


def test_the_stop_string_that_completes_first_wins():
    out, matched = run_matcher(["xxBBxxAA"], ["AA", "BB"])
    assert "".join(out) == "xx" and matched == "BB"
    out, matched = run_matcher(["aca"], ["c", "aca"])  # "c" completes before "aca" does
    assert "".join(out) == "a" and matched == "c"


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet="abc", max_size=30), cuts=st.lists(st.integers(0, 30), max_size=6),
       stops=st.lists(st.text(alphabet="abc", min_size=1, max_size=4), min_size=1, max_size=3))
def test_output_is_the_text_before_the_first_stop_whatever_the_chunking(text, cuts, stops):
    bounds = sorted({0, len(text), *[c for c in cuts if c <= len(text)]})
    pieces = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    out, matched = run_matcher(pieces, stops)
    ends = [(text.find(s) + len(s), text.find(s), s) for s in stops if s in text]
    if not ends:
        assert "".join(out) == text and matched is None
    else:  # the stop string that completes first (the longest if several complete together), cut at its start
        _, start, stop = min(ends)
        assert "".join(out) == text[:start] and matched == stop


def test_detokenizer_waits_for_the_second_byte_of_a_two_byte_character():
    ids = TOKENIZER("é!", add_special_tokens=False)["input_ids"]
    assert ids == [0xC3, 0xA9, ord("!")]
    detokenizer = IncrementalDetokenizer(TOKENIZER)
    assert [detokenizer.push(t) for t in ids] == ["", "é", "!"]
    assert detokenizer.flush() == ""


def test_detokenizer_skips_special_tokens_and_flushes_an_incomplete_tail():
    detokenizer = IncrementalDetokenizer(TOKENIZER)
    assert detokenizer.push(ord("a")) == "a"
    assert detokenizer.push(TOKENIZER.eos_token_id) == ""
    assert detokenizer.push(0xE2) == ""  # first byte of a three-byte character, never completed
    assert detokenizer.flush() == "\ufffd"


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.characters(exclude_characters="\ufffd"), max_size=40))
def test_detokenized_pieces_concatenate_to_the_text_and_never_show_a_partial_character(text):
    """U+FFFD is excluded from the text: it is how a partial character would show."""
    ids = TOKENIZER(text, add_special_tokens=False)["input_ids"]
    detokenizer = IncrementalDetokenizer(TOKENIZER)
    pieces = [detokenizer.push(t) for t in ids] + [detokenizer.flush()]
    assert "".join(pieces) == text
    assert all("\ufffd" not in piece for piece in pieces)


def test_a_genuine_replacement_character_in_the_text_comes_through_once():
    ids = TOKENIZER("a\ufffdb", add_special_tokens=False)["input_ids"]
    detokenizer = IncrementalDetokenizer(TOKENIZER)
    pieces = [detokenizer.push(t) for t in ids] + [detokenizer.flush()]
    assert "".join(pieces) == "a\ufffdb"


def test_plain_chat_fallback_lists_the_turns_and_ends_with_the_assistant_cue():
    messages = [ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content="Hi")]
    assert render_plain_chat(messages) == "System: Be brief.\n\nUser: Hi\n\nAssistant:"
