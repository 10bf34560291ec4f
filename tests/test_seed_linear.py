"""One matrix product per seed (corelib.seed_linear): the same values and gradients as vmap's batched product."""

import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call, stack_module_state, vmap

from corelib import seed_linear
from corelib.engine import SeedStack
from corelib.seed_linear import StackedLinear, linear, per_seed, per_seed_products


@pytest.fixture
def threads(request):
    before = torch.get_num_threads()
    torch.set_num_threads(getattr(request, "param", 2))
    yield torch.get_num_threads()
    torch.set_num_threads(before)


two_threads = threads


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


@pytest.mark.parametrize("threads", [1, 2, 3, 4], indirect=True)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(3, 64, 2, 16), (3, 96, 24), (5, 70, 53)])
def test_per_seed_products_equal_the_batched_product_bit_for_bit(threads, bias, shape):
    template, params = _layers(shape[0], shape[-1], 40, bias)
    params = {f"layer.{k}": v for k, v in params.items()}
    x = torch.randn(shape)
    batched = _grads(template, params, x, per_seed_on=False)
    split = _grads(template, params, x, per_seed_on=True)
    assert len(batched) == len(split) == (4 if bias else 3)
    for a, b in zip(batched, split):
        assert torch.equal(a, b)
    b1 = params["layer.bias"][1] if bias else None
    torch.testing.assert_close(batched[0][1], F.linear(x[1], params["layer.weight"][1], b1))


def test_stacked_linear_is_one_linear_layer_per_seed(monkeypatch):
    monkeypatch.setattr(seed_linear, "_products", seed_linear._split_products)  # the split, whatever the check says
    torch.manual_seed(0)
    x, w, b = torch.randn(3, 70, 7), torch.randn(3, 4, 7), torch.randn(3, 4)
    y = StackedLinear.apply(x, w, b)
    for s in range(3):
        torch.testing.assert_close(y[s], F.linear(x[s], w[s], b[s]))
    assert torch.autograd.gradcheck(StackedLinear.apply, tuple(t.double().requires_grad_() for t in (x, w, b)))


def test_a_product_split_only_where_it_gave_the_batched_values(monkeypatch):
    monkeypatch.setattr(seed_linear, "_same_as_batched", {})
    a, b = torch.randn(3, 80, 16), torch.randn(3, 16, 24)
    assert torch.equal(seed_linear._products(a, b), torch.bmm(a, b))
    (key,) = seed_linear._same_as_batched
    calls = []

    def rounding_otherwise(x, y):
        calls.append(1)
        return torch.bmm(x, y) * (1 + 2**-20)

    monkeypatch.setattr(seed_linear, "_split_products", rounding_otherwise)
    seed_linear._same_as_batched.clear()
    assert torch.equal(seed_linear._products(a, b), torch.bmm(a, b))  # checked, refused: batched
    assert seed_linear._same_as_batched == {key: False} and len(calls) == 1
    assert torch.equal(seed_linear._products(a, b), torch.bmm(a, b)) and len(calls) == 1  # not checked again


def test_the_check_leaves_the_global_random_stream_alone():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    seed_linear._products(torch.ones(3, 33, 5), torch.ones(3, 5, 7))  # a layout checked for the first time
    assert torch.equal(torch.rand(3), expected)


def test_within_per_seed_but_outside_vmap_gradients_are_the_layers_own():
    layer = torch.nn.Linear(6, 3)
    x = torch.randn(4, 5, 6, requires_grad=True)
    with per_seed():
        y = linear(layer, x)
    weights = torch.linspace(-1, 1, y.numel()).view(y.shape)
    grads = torch.autograd.grad((y * weights).sum(), (x, layer.weight, layer.bias))
    expected = torch.autograd.grad((layer(x) * weights).sum(), (x, layer.weight, layer.bias))
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want)


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


@pytest.mark.slow  # trains the book's model
def test_training_the_book_model_gives_the_same_weights_either_way(two_threads, monkeypatch):
    """Three seeds of the modular-addition model (p = 53, d_model 128, dropout), two steps."""
    from corelib.engine import PrefixData, Trainer
    from corelib.experiments.modular_runs import ModularParams
    from corelib.masks import DropoutStreams
    from corelib.tasks.modular import modular_addition_split

    assert per_seed_products(3, torch.device("cpu"), torch.float32)  # the stack below splits its products
    params = ModularParams()
    (x, y), _ = modular_addition_split(params.p, params.train_fraction, params.split_seed, params.split_permutation)
    data = PrefixData.from_tokens(x, y)
    weights, split_calls = [], []
    real = seed_linear._split_products
    monkeypatch.setattr(seed_linear, "_split_products", lambda a, b: split_calls.append(1) or real(a, b))
    for split in (True, False):
        stack = SeedStack.initialise(params.model_config(), [0, 1, 2], "cpu")
        trainer = Trainer(
            stack, data, lr=1e-3, weight_decay=1.0, batch_size=512, streams=DropoutStreams(0.1, [0, 1, 2])
        )
        if not split:
            trainer.stack.train_logits = lambda d, i, m, p=None, s=trainer.stack: s._train_logits(
                d, i, m, s.params if p is None else p
            )
        trainer.epoch(0)
        weights.append({k: v.detach().clone() for k, v in trainer.stack.params.items()})
    assert len(split_calls) > 20  # the products were split (and each layout checked)
    for k in weights[0]:
        assert torch.equal(weights[0][k], weights[1][k]), k


def test_a_flop_counter_counts_the_products_once_and_no_check(monkeypatch):
    from torch.utils.flop_counter import FlopCounterMode

    monkeypatch.setattr(seed_linear, "_same_as_batched", {})
    a, b = torch.randn(3, 80, 16), torch.randn(3, 16, 24)
    with FlopCounterMode(display=False) as counter:
        out = seed_linear._products(a, b)
    assert torch.equal(out, torch.bmm(a, b))
    assert counter.get_total_flops() == 2 * 3 * 80 * 16 * 24
    assert seed_linear._same_as_batched == {}  # checked later, outside the counter
