"""One matrix product per seed (corelib.seed_linear): the same values and gradients as vmap's batched product."""

import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call, stack_module_state, vmap

from corelib.engine import SeedStack
from corelib.seed_linear import StackedLinear, linear, per_seed, per_seed_products


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def _layers(n_seeds: int, d_in: int, d_out: int, bias: bool = True) -> tuple[torch.nn.Linear, dict]:
    layers = []
    for s in range(n_seeds):
        torch.manual_seed(s)
        layers.append(torch.nn.Linear(d_in, d_out, bias=bias))
    params, _ = stack_module_state(layers)
    return layers[0], {k: v.detach().requires_grad_(True) for k, v in params.items()}


class _Apply(torch.nn.Module):
    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        return linear(self.layer, x)


def _grads(template, params, x, per_seed_on: bool):
    """Output and gradients (input, weight, bias) of the vmapped layer, with or without per_seed."""
    x = x.detach().requires_grad_(True)
    with per_seed(per_seed_on):
        y = vmap(lambda p, xs: functional_call(_Apply(template), p, (xs,)))(params, x)
    (y * torch.linspace(-1, 1, y.numel()).view(y.shape)).sum().backward()
    out = (y.detach(), x.grad, *(v.grad for v in params.values()))
    for v in params.values():
        v.grad = None
    return out


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(3, 64, 2, 16), (3, 96, 16), (5, 70, 16)])
def test_per_seed_products_equal_the_batched_product_bit_for_bit(two_threads, bias, shape):
    template, params = _layers(shape[0], shape[-1], 24, bias)
    params = {f"layer.{k}": v for k, v in params.items()}
    x = torch.randn(shape)
    batched = _grads(template, params, x, per_seed_on=False)
    split = _grads(template, params, x, per_seed_on=True)
    assert len(batched) == len(split) == (4 if bias else 3)
    for a, b in zip(batched, split):
        assert torch.equal(a, b)
    b1 = params["layer.bias"][1] if bias else None
    torch.testing.assert_close(batched[0][1], F.linear(x[1], params["layer.weight"][1], b1))


def test_stacked_linear_is_one_linear_layer_per_seed():
    torch.manual_seed(0)
    x, w, b = torch.randn(3, 5, 7), torch.randn(3, 4, 7), torch.randn(3, 4)
    y = StackedLinear.apply(x, w, b)
    for s in range(3):
        torch.testing.assert_close(y[s], F.linear(x[s], w[s], b[s]))
    assert torch.autograd.gradcheck(StackedLinear.apply, tuple(t.double().requires_grad_() for t in (x, w, b)))


def test_outside_per_seed_linear_is_the_layer_itself():
    layer = torch.nn.Linear(6, 3)
    x = torch.randn(2, 6)
    assert torch.equal(linear(layer, x), layer(x))
    with per_seed():
        torch.testing.assert_close(linear(layer, x), layer(x))  # no vmap: F.linear


def test_one_product_per_seed_only_where_cpu_threads_would_idle(two_threads):
    cpu = torch.device("cpu")
    assert per_seed_products(3, cpu, torch.float32)
    assert per_seed_products(5, cpu, torch.float32)
    assert not per_seed_products(4, cpu, torch.float32)  # two seeds per thread
    assert not per_seed_products(9, cpu, torch.float32)  # many seeds: little idling
    assert not per_seed_products(3, cpu, torch.bfloat16)
    assert not per_seed_products(3, torch.device("cuda"), torch.float32)


def test_training_the_book_model_gives_the_same_weights_either_way(two_threads):
    """Three seeds of the modular-addition model (p = 53, d_model 128, dropout), two steps."""
    from corelib.engine import PrefixData, Trainer
    from corelib.experiments.modular_runs import ModularParams
    from corelib.masks import DropoutStreams
    from corelib.tasks.modular import modular_addition_split

    assert per_seed_products(3, torch.device("cpu"), torch.float32)  # the stack below splits its products
    params = ModularParams()
    (x, y), _ = modular_addition_split(params.p, params.train_fraction, params.split_seed, params.split_permutation)
    data = PrefixData.from_tokens(x, y)
    weights = []
    for split in (True, False):
        stack = SeedStack.initialise(params.model_config(), [0, 1, 2], "cpu")
        trainer = Trainer(
            stack, data, lr=1e-3, weight_decay=1.0, batch_size=512, streams=DropoutStreams(0.1, [0, 1, 2])
        )
        if not split:
            trainer.stack.train_logits = lambda d, i, m, p=None, s=trainer.stack: s._train_logits(d, i, m, s.params)
        trainer.epoch(0)
        weights.append({k: v.detach().clone() for k, v in trainer.stack.params.items()})
    for k in weights[0]:
        assert torch.equal(weights[0][k], weights[1][k]), k
