"""The training data order: seeded permutations per epoch, micro-batches grouped by length, exact resume."""
from __future__ import annotations

import random

import pytest
import torch

from dspark import Target
from dspark.config import ConfigError, TrainConfig
from dspark.model.draft import DSparkDraft
from dspark.testbed.random_pair import draft_config_for, tiny_target
from dspark.train.data import Example
from dspark.train.hidden import OnlineHiddenStates
from dspark.train.order import DataOrder
from dspark.train.trainer import train


def _padded_share(order: DataOrder, lengths: list[int], batch: int, epochs: int) -> float:
    """Real tokens / padded tokens over the trainer's micro-batches (counter slices of `batch`)."""
    real = padded = 0
    for start in range(0, epochs * order.n - batch + 1, batch):
        rows = [lengths[order[q]] for q in range(start, start + batch)]
        real, padded = real + sum(rows), padded + batch * max(rows)
    return real / padded


def test_the_plain_order_is_each_epochs_seeded_permutation():
    order = DataOrder(37, seed=3, batch_size=4)
    for epoch in range(3):
        expected = torch.randperm(37, generator=torch.Generator().manual_seed(3 * 1_000_003 + epoch))
        assert [order[q] for q in range(37 * epoch, 37 * (epoch + 1))] == expected.tolist()


@pytest.mark.parametrize("n, batch", [(1003, 32), (250, 8), (64, 16)])
def test_grouped_epochs_are_permutations_of_similar_length_batches_and_deterministic(n, batch):
    rng = random.Random(n)
    lengths = [rng.choice([rng.randint(20, 120), rng.randint(300, 1024)]) for _ in range(n)]
    grouped = DataOrder(n, seed=0, batch_size=batch, group_by_length=8, lengths=lengths)
    again = DataOrder(n, seed=0, batch_size=batch, group_by_length=8, lengths=lengths)
    epochs = [[grouped[q] for q in range(n * e, n * (e + 1))] for e in range(3)]
    assert all(sorted(epoch) == list(range(n)) for epoch in epochs)  # every example once per epoch
    assert epochs[0] != epochs[1] != epochs[2]
    assert [again[q] for q in range(3 * n)] == [i for epoch in epochs for i in epoch]
    plain = _padded_share(DataOrder(n, seed=0, batch_size=batch), lengths, batch, 3)  # 0.35-0.43 here
    assert plain < 0.45 and _padded_share(grouped, lengths, batch, 3) > 1.6 * plain  # 0.69-0.79


def test_grouping_without_lengths_or_with_a_negative_window_is_refused():
    with pytest.raises(ValueError, match="needs every example's length"):
        DataOrder(10, seed=0, batch_size=2, group_by_length=4)
    with pytest.raises(ConfigError, match="group_by_length"):
        TrainConfig(group_by_length=-1)


def test_resume_with_grouped_batches_reaches_the_losses_of_an_uninterrupted_run(tmp_path):
    model = tiny_target("qwen3", seed=0, num_layers=3)
    cfg = draft_config_for(model, layer_ids=(0, 1), block_size=4)
    gen = torch.Generator().manual_seed(0)
    examples = [Example(str(i), tuple(torch.randint(0, 96, (n,), generator=gen).tolist()), (0,) * 6 + (1,) * (n - 6))
                for i, n in enumerate([12, 40, 14, 38, 16, 36, 18, 34])]
    source = OnlineHiddenStates(Target(model, cfg.target_layer_ids), examples)
    config = TrainConfig(steps=6, lr=3e-3, num_anchors=8, batch_size=2, warmup_ratio=0.2, save_every=2,
                         group_by_length=2)

    def draft() -> DSparkDraft:
        torch.manual_seed(1)
        d = DSparkDraft(cfg)
        d.tie_embeddings(model.get_input_embeddings(), model.get_output_embeddings())
        return d

    whole = train(draft(), source, config, tmp_path / "a", progress=False)
    first = train(draft(), source, config, tmp_path / "b", progress=False, stop_after=3)
    rest = train(draft(), source, config, tmp_path / "b", resume=True, progress=False)
    assert [m.loss for m in first.history + rest.history] == pytest.approx([m.loss for m in whole.history], abs=1e-6)


def test_train_fit_passes_group_by_length_to_the_trainer(tmp_path, monkeypatch):
    import dspark.train.trainer as trainer
    from dspark.cli import main
    from dspark.train.data import write_examples

    model = tiny_target("qwen3", seed=0, num_layers=3)
    model.save_pretrained(tmp_path / "target")
    write_examples([Example(str(i), tuple(range(1, 11 + 3 * i)), (0,) * 4 + (1,) * (6 + 3 * i)) for i in range(4)],
                   tmp_path / "data.jsonl")
    seen = []
    real_train = trainer.train
    monkeypatch.setattr(trainer, "train", lambda draft, source, config, *a, **k: seen.append(config.group_by_length)
                        or real_train(draft, source, config, *a, **k))
    assert main(["train", "fit", "--target", str(tmp_path / "target"), "--data", str(tmp_path / "data.jsonl"),
                 "--steps", "2", "--batch-size", "2", "--num-anchors", "4", "--block-size", "4", "--markov-rank", "8",
                 "--layers", "0,1", "--mask-token-id", "96", "--group-by-length", "2",
                 "--out", str(tmp_path / "run")]) == 0
    assert seen == [2] and (tmp_path / "run" / "final" / "model.safetensors").is_file()
