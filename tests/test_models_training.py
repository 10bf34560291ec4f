"""The hooked transformer and the training loop: hooks, layer slicing, causality, resume."""
import numpy as np
import pytest
import torch

from corelib.models import Transformer, TransformerConfig, resid_hook
from corelib.training import TrainConfig, train, train_model


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_start_and_stop_at_layer_compose_to_the_full_forward(norm):
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=7, d_model=16, n_heads=4, d_ff=32, n_layers=2,
                                          n_ctx=5, norm=norm)).eval()
    x = torch.randint(0, 7, (3, 5))
    full = model(x)
    for layer in range(3):
        resid = model(x, stop_at_layer=layer)
        torch.testing.assert_close(model(resid, start_at_layer=layer), full)


def test_cache_names_and_readout_match_logits():
    torch.manual_seed(1)
    model = Transformer(TransformerConfig(vocab_size=5, d_model=8, n_heads=2, d_ff=16, n_ctx=4)).eval()
    x = torch.randint(0, 5, (2, 4))
    logits, cache = model.run_with_cache(x)
    for name in ["hook_embed", "hook_pos_embed", "blocks.0.attn.hook_pattern", resid_hook(0)]:
        assert name in cache
    f = model.readout(0)
    torch.testing.assert_close(f(cache[resid_hook(0)][1, 2]), logits[1, 2])
    with pytest.raises(ValueError, match="last block"):
        Transformer(TransformerConfig(vocab_size=5, d_model=8, n_heads=2, n_layers=2)).readout(0)


def test_attention_is_causal():
    torch.manual_seed(2)
    model = Transformer(TransformerConfig(vocab_size=5, d_model=8, n_heads=2, d_ff=16, n_ctx=6)).eval()
    x = torch.randint(0, 5, (1, 6))
    y = x.clone()
    y[0, 4:] = (x[0, 4:] + 1) % 5
    torch.testing.assert_close(model(x)[0, :4], model(y)[0, :4])
    assert not torch.allclose(model(x)[0, 4:], model(y)[0, 4:])


def test_bad_inputs_are_explained():
    model = Transformer(TransformerConfig(vocab_size=5, d_model=8, n_heads=2, n_ctx=4))
    with pytest.raises(ValueError, match="n_ctx"):
        model(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match="tokens must be integers"):
        model(torch.zeros(1, 3, 8))
    with pytest.raises(ValueError, match="divisible"):
        TransformerConfig(vocab_size=5, d_model=10, n_heads=4)


def _data(n=48, t=6, v=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    seq = torch.randint(0, v, (n, t + 1), generator=g)
    return seq[:, :-1], seq[:, 1:]


CFG = TransformerConfig(vocab_size=4, d_model=8, n_heads=2, d_ff=16, n_ctx=6, dropout=0.1)


def test_resume_from_checkpoint_gives_identical_weights(tmp_path):
    data = _data()
    torch.manual_seed(3)
    straight = Transformer(CFG)
    init = {k: v.clone() for k, v in straight.state_dict().items()}
    hist_a = train(straight, data, TrainConfig(epochs=4, batch_size=16), seed=3, test_data=data,
                   checkpoint=tmp_path / "a.pt", progress=False)

    first = Transformer(CFG)
    first.load_state_dict(init)
    train(first, data, TrainConfig(epochs=2, batch_size=16), seed=3, test_data=data,
          checkpoint=tmp_path / "b.pt", progress=False)
    resumed = Transformer(CFG)  # a fresh process would start from new random weights
    hist_b = train(resumed, data, TrainConfig(epochs=4, batch_size=16), seed=3, test_data=data,
                   checkpoint=tmp_path / "b.pt", progress=False)
    for k, v in straight.state_dict().items():
        torch.testing.assert_close(resumed.state_dict()[k], v, rtol=0, atol=0)
    assert hist_a == hist_b
    assert len(hist_b["loss"]) == 4


def test_training_learns_and_is_deterministic(tmp_path):
    x = torch.arange(6).repeat(64, 1) % 4
    data = (x, (x + 1) % 4)  # deterministic next token: learnable to 100 %
    cfg = TrainConfig(epochs=15, batch_size=16, lr=1e-2)
    m1, h1 = train_model(CFG, cfg, data, seed=5, test_data=data, progress=False)
    m2, h2 = train_model(CFG, cfg, data, seed=5, test_data=data, progress=False)
    assert h1["test_acc"][-1] == 1.0
    assert h1 == h2


def test_corrupt_checkpoint_is_refused(tmp_path):
    bad = tmp_path / "c.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot be loaded"):
        train(Transformer(CFG), _data(), TrainConfig(epochs=1), seed=0, checkpoint=bad, progress=False)


def test_run_dir_of_another_run_is_refused(tmp_path):
    data = _data()
    train_model(CFG, TrainConfig(epochs=1), data, seed=0, run_dir=tmp_path, progress=False)
    with pytest.raises(ValueError, match="different run"):
        train_model(CFG, TrainConfig(epochs=1), data, seed=1, run_dir=tmp_path, progress=False)


def test_invalid_training_settings():
    with pytest.raises(ValueError, match="score_positions"):
        TrainConfig(epochs=1, score_positions="first")
    with pytest.raises(ValueError, match="invalid training settings"):
        TrainConfig(epochs=1, lr=0)
