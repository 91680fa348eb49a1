"""The tiny testbed recipe the tests build (seconds, not minutes); imported by the conftest and the tests."""
from __future__ import annotations

from dspark.testbed.corpus import CorpusSpec
from dspark.testbed.recipe import TargetRecipe

SMALL_CORPUS = CorpusSpec(train_bytes=120_000, heldout_bytes=40_000)
TINY = TargetRecipe(corpus=SMALL_CORPUS, vocab_size=320, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2,
                    intermediate_size=64, context=64, seq_len=64, short_seq_len=32, long_every=2, batch_size=2,
                    steps=2, warmup_steps=1, eval_sequences=2)
