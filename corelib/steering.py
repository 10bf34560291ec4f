"""Adaptive core steering during generation (the paper's appendix, "Adaptive generation steering").

At every decoding step the hidden state of the last token at the core's layer is reflected
through the hyperplane orthogonal to the core axis ``q``, by a per-token strength ``s``::

    h~ = h - 2 s [(h - mu)^T q] q        (s = 1 is the full core flip)

``s`` is chosen in three forward passes:

1. **gate**: a clean pass; if the probability mass on the agreement verbs (is/are/was/were) is
   below ``gate``, the token involves no agreement decision and ``s = 0``;
2. **probe**: a pass at strength ``probe`` measures the local gain ``g = (m1 - m0) / probe`` of
   the *generation margin* ``m = logsumexp(are, were) - logsumexp(is, was)``;
3. **steer**: ``s* = (m_target - m0) / g`` with ``m_target = -sign(m0) * epsilon``, the smallest
   flip that crosses the margin with a buffer ``epsilon``, optionally capped at ``|s*| <= cap``.

The hidden-state change is the core's own flip (:meth:`corelib.ace.Core.flip`) scaled by ``s``,
applied with a TransformerLens hook at ``blocks.{layer}.hook_resid_post``. Steps reuse a
key/value cache: the token's keys and values in the cache are those of the pass that produced it
(steered or clean), so a steered token keeps influencing the tokens after it.
:func:`generate_batch` runs many requests as one batch, with the result :func:`generate` gives each.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import torch
from tqdm.auto import tqdm
from transformers.cache_utils import DynamicLayer

from ._checks import check_settings
from .ace import Core
from .lm import LanguageModel
from .models import resid_hook

__all__ = [
    "Generation",
    "SteeringConfig",
    "TokenClasses",
    "check_classes",
    "generate",
    "generate_batch",
    "generation_margin",
    "steer_hook",
    "inversion_stats",
    "word_inversion_stats",
]


@dataclass(frozen=True)
class SteeringConfig:
    """Settings of the adaptive steering.

    The paper's appendix describes the gate, the probe, the buffer and the cap without values;
    ``probe``, ``epsilon`` and ``cap`` default to the reference code's (0.2, 1.0, 50). The
    reference code has no gate (``gate=0`` steers every step); the paper gates, and 0.2 is this
    book's threshold.

    Attributes:
        gate: minimal probability mass on the tokens of the two classes (the four agreement
            verbs) for a step to be steered.
        probe: strength of the probing pass that measures the local gain.
        epsilon: buffer of the margin crossing (logit units).
        cap: largest allowed ``|s|`` (None: no cap).
    """

    gate: float = 0.2
    probe: float = 0.2
    epsilon: float = 1.0
    cap: float | None = 50.0

    def __post_init__(self):
        finite = {"probe": self.probe, "epsilon": self.epsilon, **({} if self.cap is None else {"cap": self.cap})}
        check_settings("SteeringConfig", non_negative=finite)
        if not 0 <= self.gate <= 1:
            raise ValueError(f"gate is a probability mass in [0, 1], got {self.gate}")
        if self.probe <= 0:
            raise ValueError(f"probe strength must be positive, got {self.probe}")
        if self.epsilon < 0:
            raise ValueError(f"epsilon must be non-negative, got {self.epsilon}")
        if self.cap is not None and self.cap <= 0:
            raise ValueError(f"cap must be positive or None, got {self.cap}")


def steer_hook(core: Core, strength):
    """Hook ``fn(act, hook)`` moving the last position by ``strength`` times the core flip.

    ``strength`` is a number, or a tensor with one strength per batch row (0 leaves a row as is).
    """

    def fn(act: torch.Tensor, hook=None) -> torch.Tensor:
        h = act[:, -1]
        s = strength
        if isinstance(s, torch.Tensor):
            s = s.to(device=h.device, dtype=h.dtype)[:, None]
        out = act.clone()
        out[:, -1] = h + s * (core.flip(h, centered=True) - h)
        return out

    return fn


TokenClasses = Mapping[str, Sequence[str]]
"""The two classes of next tokens between which steering moves a decision, ``{name: tokens}``,
the margin's negative side first; every token is a single token of the model. A task names them:
the agreement verbs are :data:`corelib.tasks.sva.AGREEMENT_VERBS`,
``{"singular": (" is", " was"), "plural": (" are", " were")}``."""


def check_classes(classes: TokenClasses) -> dict[str, tuple[str, ...]]:
    """``classes`` as ``{name: tokens}`` with tuples, after checking that it holds two named,
    non-empty, disjoint classes of tokens."""
    example = "e.g. corelib.tasks.sva.AGREEMENT_VERBS"
    if not isinstance(classes, Mapping) or len(classes) != 2:
        raise ValueError(f"classes must map two class names to their tokens, the negative side first ({example})")
    if any(isinstance(tokens, str) or not tokens for tokens in classes.values()):
        raise ValueError(f"each class is a non-empty sequence of token strings, not one string ({example})")
    out = {str(name): tuple(tokens) for name, tokens in classes.items()}
    negative, positive = out.values()
    if set(negative) & set(positive):
        raise ValueError(f"a token cannot belong to both classes: {sorted(set(negative) & set(positive))}")
    return out


def generation_margin(logits: torch.Tensor, verb_ids: dict[str, int], classes: TokenClasses) -> torch.Tensor:
    """``logsumexp(positive) - logsumexp(negative)`` of next-token logits (..., vocab): with the
    agreement verbs, ``logsumexp(are, were) - logsumexp(is, was)``. ``verb_ids`` maps each token
    of ``classes`` to its id."""
    return _verb_margin({v: logits[..., i] for v, i in verb_ids.items()}, classes)


@dataclass
class Generation:
    """A generated continuation and what happened at each step.

    ``tokens`` are the new token ids; ``pieces`` their text. Per step: ``gated`` (an agreement
    decision was steered), ``strength`` (s*), ``clean_margin`` and ``margin`` (generation
    margins of the clean and the used logits), ``clean_token`` (the greedy choice of the clean
    pass), ``verb`` / ``clean_verb``: the name of the token class (:data:`TokenClasses`, e.g.
    "singular" or "plural") or None for the emitted and the clean greedy token, and
    ``verb_mass``: the clean pass's probability on the classes' tokens (what
    the gate compares with its threshold).
    """

    prompt: str
    tokens: list[int] = field(default_factory=list)
    pieces: list[str] = field(default_factory=list)
    gated: list[bool] = field(default_factory=list)
    strength: list[float] = field(default_factory=list)
    clean_margin: list[float] = field(default_factory=list)
    margin: list[float] = field(default_factory=list)
    clean_token: list[int] = field(default_factory=list)
    verb: list[str | None] = field(default_factory=list)
    clean_verb: list[str | None] = field(default_factory=list)
    verb_mass: list[float] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The continuation as text."""
        return "".join(self.pieces)

    def to_dict(self) -> dict:
        return asdict(self)


def _number(token: int, verb_ids: dict[str, int], classes: TokenClasses) -> str | None:
    for number, verbs in classes.items():
        if token in (verb_ids[v] for v in verbs):
            return number
    return None


def _choose(logits: torch.Tensor, greedy: bool, temperature: float, top_k: int, gen: torch.Generator) -> int:
    if greedy:
        return int(logits.argmax())
    values, idx = torch.topk(logits.float().cpu() / temperature, min(top_k, logits.shape[-1]))
    return int(idx[torch.multinomial(torch.softmax(values, -1), 1, generator=gen)])


class _OneThreadForSmallBatches:
    """One intra-op thread on the CPU while decoding a few rows: one-token passes of a small batch
    are too small to gain from threads, and on a busy machine synchronising threads costs several
    times the work. Larger batches keep the threads."""

    def __init__(self, device: torch.device, rows: int = 1):
        self.active = device.type == "cpu" and rows < 8

    def __enter__(self):
        if self.active:
            self.threads = torch.get_num_threads()
            torch.set_num_threads(1)

    def __exit__(self, *exc):
        if self.active:
            torch.set_num_threads(self.threads)


def generate(
    lm: LanguageModel,
    prompt: str,
    *,
    classes: TokenClasses,
    core: Core | None = None,
    layer: int | None = None,
    config: SteeringConfig = SteeringConfig(),
    max_new_tokens: int = 50,
    greedy: bool = True,
    temperature: float = 1.0,
    top_k: int = 50,
    seed: int = 0,
) -> Generation:
    """Generate from ``prompt``, steering agreement decisions when ``core`` is given.

    Args:
        lm: the model.
        prompt: text; with the model's prefix token it must be at least two tokens long.
        classes: the two token classes of a decision (:data:`TokenClasses`), e.g. the agreement
            verbs; the gate, the margin and the recorded ``verb`` use them.
        core: the agreement core (None: plain generation, the "base" text).
        layer: decoder layer of ``core`` (its hook is ``blocks.{layer}.hook_resid_post``).
        config: gate, probe, epsilon and cap.
        max_new_tokens: number of tokens to generate (stops early at the end-of-text token).
        greedy: argmax decoding; otherwise sampling with ``temperature`` and ``top_k``
            (seeded by ``seed``, so base and steered runs share their random draws).
    """
    if core is not None and layer is None:
        raise ValueError("pass the core's layer (layer=...) together with core")
    return generate_batch(
        lm,
        [prompt],
        classes=classes,
        core=core,
        layer=layer,
        configs=[config if core is not None else None],
        max_new_tokens=max_new_tokens,
        greedy=greedy,
        temperature=temperature,
        top_k=top_k,
        seed=seed,
    )[0]


def _verb_margin(verbs: dict[str, torch.Tensor], classes: TokenClasses) -> torch.Tensor:
    """The generation margin from the logits of the classes' tokens (:meth:`LanguageModel.token_logits`)."""
    negative, positive = classes.values()
    pos = torch.stack([verbs[v] for v in positive], -1)
    neg = torch.stack([verbs[v] for v in negative], -1)
    return torch.logsumexp(pos.float(), -1) - torch.logsumexp(neg.float(), -1)


def _rows_without_last(cache, rows: torch.Tensor, *, crop: bool = True):
    """A new key/value cache holding the batch rows ``rows`` of ``cache`` without its last
    position (with it if not ``crop``); the tensors of ``cache`` are left untouched (the layers
    are copied before Transformers' own ``batch_select_indices`` and ``crop`` replace their
    tensors)."""
    sub = copy.copy(cache)
    sub.layers = [copy.copy(layer) for layer in cache.layers]
    sub.batch_select_indices(rows)
    if crop:
        sub.crop(-1)
    return sub


def _check_dynamic(layer) -> None:
    if not isinstance(layer, DynamicLayer):
        raise TypeError(
            f"steering rewrites key/value caches of type DynamicLayer; this model's "
            f"cache has {type(layer).__name__} layers"
        )


def _replace_last(cache, sub, rows: torch.Tensor) -> None:
    """Write the last position of ``sub`` (rows ``rows`` of ``cache``) into ``cache``."""
    for layer, part in zip(cache.layers, sub.layers):
        _check_dynamic(layer)
        layer.keys[rows, :, -1:] = part.keys[:, :, -1:]
        layer.values[rows, :, -1:] = part.values[:, :, -1:]


def _per_row(value, rows: int, name: str) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != rows:
            raise ValueError(f"{name} has {len(value)} entries for {rows} prompts")
        return list(value)
    return [value] * rows


def _append_rows(cache, sub) -> None:
    """Append the rows of ``sub`` (a cache of the same length) to ``cache``."""
    for layer, part in zip(cache.layers, sub.layers):
        _check_dynamic(layer)
        layer.keys = torch.cat([layer.keys, part.keys], dim=0)
        layer.values = torch.cat([layer.values, part.values], dim=0)


def _clone(gen: torch.Generator) -> torch.Generator:
    twin = torch.Generator()
    twin.set_state(gen.get_state())
    return twin


@torch.no_grad()
def generate_batch(
    lm: LanguageModel,
    prompts: list[str],
    *,
    classes: TokenClasses,
    core: Core | None = None,
    layer: int | None = None,
    configs=None,
    max_new_tokens=50,
    greedy=True,
    temperature: float = 1.0,
    top_k: int = 50,
    seed=0,
    progress: bool = False,
) -> list[Generation]:
    """Generate from several prompts at once (one left-padded batch, one key/value cache).

    Request ``i`` is steered with ``configs[i]`` (a :class:`SteeringConfig`; None: plain
    generation) and generates ``max_new_tokens[i]`` tokens, greedily or by sampling as
    ``greedy[i]`` says (both may be single values). The result is that of :func:`generate` for
    each request; only the batch shapes of the matrix products differ, which can change the last
    bits of the logits.

    Requests with the same prompt and decoding share one batch row for as long as they would
    produce the same text: a plain and a steered request, or requests that differ only in their
    gate, go together until a step at which their gates disagree; the row then forks (its cache
    row is copied). The clean pass of a step runs on every row; the probe and steer passes only
    on the rows whose gate opened, on a copy of their part of the cache without the clean pass's
    position, whose steered keys and values then replace it (or become the forked row). Each
    row samples from its own generator seeded with ``seed``, copied when it forks, so a prompt's
    plain and steered requests share their random draws. ``seed`` may differ per request (a
    list): requests with different seeds never share a row, which draws several samples of one
    prompt. ``classes`` are the two token classes of a decision (:data:`TokenClasses`).
    ``progress`` shows a bar over steps.
    """
    classes = check_classes(classes)
    requests = _requests(
        lm, prompts, configs, max_new_tokens, greedy, seed, core=core, layer=layer, temperature=temperature
    )
    outs = [Generation(p) for p in prompts]
    keys, members = requests.rows()
    if not keys:
        return outs
    state = _Generation(
        lm, requests, keys, members, outs, classes=classes, core=core, layer=layer, temperature=temperature, top_k=top_k
    )
    bar = tqdm(total=max(requests.budget), desc=f"{lm.name}: generation", disable=not progress, leave=False)
    with _OneThreadForSmallBatches(lm.device, len(keys)), bar:
        while state.members:
            bar.update()
            state.step()
    return outs


@dataclass(frozen=True)
class _Requests:
    """The requests of :func:`generate_batch`, one entry per prompt."""

    prompts: list[str]
    configs: list[SteeringConfig | None]
    budget: list[int]
    greedy: list[bool]
    seeds: list[int]

    @property
    def steering(self) -> bool:
        return any(c is not None for c in self.configs)

    def rows(self) -> tuple[list[tuple[str, bool, int]], list[list[int]]]:
        """One batch row per prompt and decoding (its key) and the requests it serves (its members)."""
        prompts, greedy, seeds, budget = self.prompts, self.greedy, self.seeds, self.budget
        keys = list(dict.fromkeys((p, g, v) for p, g, v, n in zip(prompts, greedy, seeds, budget) if n > 0))
        members = [
            [i for i in range(len(prompts)) if (prompts[i], greedy[i], seeds[i]) == k and budget[i] > 0] for k in keys
        ]
        return keys, members


def _requests(
    lm: LanguageModel, prompts, configs, max_new_tokens, greedy, seed, *, core, layer, temperature
) -> _Requests:
    """The arguments of :func:`generate_batch` checked and spread to one value per prompt."""
    n_req = len(prompts)
    if isinstance(prompts, str) or n_req == 0:
        raise ValueError("prompts must be a non-empty list of strings")
    requests = _Requests(
        prompts,
        _per_row(configs, n_req, "configs"),
        [int(n) for n in _per_row(max_new_tokens, n_req, "max_new_tokens")],
        [bool(g) for g in _per_row(greedy, n_req, "greedy")],
        [int(v) for v in _per_row(seed, n_req, "seed")],
    )
    if requests.steering and (core is None or layer is None):
        raise ValueError("steered rows need the core and its layer (core=..., layer=...)")
    if requests.steering and not 0 <= layer < lm.n_layers:
        raise ValueError(f"layer must be in [0, {lm.n_layers - 1}] for {lm.name}, got {layer}")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    for prompt in prompts:
        n = len(lm.encode(prompt))
        if n < 2:
            raise ValueError(
                f"prompt {prompt!r} is {n} token(s) long; generation needs at least two (the prefix is cached)"
            )
    return requests


@dataclass
class _Step:
    """One decoding step.

    The clean pass gives, per batch row, the logits ``clean``, the generation margin ``m0`` and
    the verb mass ``mass``. The step's output row ``j`` continues batch row ``source[j]`` for the
    requests ``groups[j]``, clean (``action[j]`` None) or steered with ``action[j] = (probe,
    epsilon, cap)``; the first ``kept`` output rows keep their batch row, the others fork.
    """

    clean: torch.Tensor
    m0: torch.Tensor
    mass: torch.Tensor
    source: list[int]
    action: list[tuple | None]
    groups: list[list[int]]
    kept: int

    @property
    def src(self) -> torch.Tensor:
        return torch.tensor(self.source)


def _by_action(configs: list, members: list[int], mass: float) -> dict:
    """The requests ``members`` of a row by what this step does to them: None (clean) or the
    steering settings of an open gate."""
    by = {}
    for m in members:
        c = configs[m]
        gated = c is not None and mass >= c.gate
        by.setdefault((c.probe, c.epsilon, c.cap) if gated else None, []).append(m)
    return by


def _strength(m0: torch.Tensor, m1: torch.Tensor, probe, epsilon, cap) -> torch.Tensor:
    """``s* = (m_target - m0) / g`` with the gain ``g = (m1 - m0) / probe`` (0 where ``g = 0``),
    ``m_target = -sign(m0) * epsilon``, capped at ``|s*| <= cap``."""
    gain = (m1 - m0) / probe
    target = torch.where(m0 > 0, -epsilon, epsilon)
    s = torch.where(gain != 0, (target - m0) / torch.where(gain != 0, gain, 1.0), 0.0)
    return torch.minimum(torch.maximum(s, -cap), cap)


def _record(g: Generation, step: dict) -> None:
    """Append one step's values to the per-step lists of ``g``."""
    for name, value in step.items():
        getattr(g, name).append(value)


class _Generation:
    """The state of :func:`generate_batch` between steps.

    One batch row per group of requests that still produce the same text, with its key/value
    cache row, attention mask, last token ``x``, random generator and decoding (``greedy``).
    """

    def __init__(
        self, lm: LanguageModel, requests: _Requests, keys, members, outs, *, classes, core, layer, temperature, top_k
    ):
        self.lm, self.requests, self.members, self.outs = lm, requests, members, outs
        self.classes = classes
        self.core, self.temperature, self.top_k = core, temperature, top_k
        batch = lm.tokenize([k[0] for k in keys])
        self.cache = lm.prefix_cache(batch)
        self.mask = batch.attention_mask.clone()
        self.x = batch.input_ids[:, -1:].clone()
        self.gens = [torch.Generator().manual_seed(k[2]) for k in keys]
        self.greedy = [k[1] for k in keys]
        self.vid = {verb: lm.single_token(verb) for verbs in classes.values() for verb in verbs}
        self.verb_tensor = torch.tensor(list(self.vid.values()))
        self.hook = resid_hook(layer) if requests.steering else None
        self.eos = lm.tokenizer.eos_token_id

    def step(self) -> None:
        """One token for every request still generating."""
        step = self.plan(self.clean_pass())
        logits = step.clean[step.src].clone()
        strength = torch.zeros(len(step.source), dtype=torch.float64)
        steered = [j for j, act in enumerate(step.action) if act is not None]
        if steered:
            sel = torch.tensor(steered)
            logits[sel], strength[sel] = self.steer(step, steered)
        self.fork(step)
        tokens = self.emit(step, logits, strength)
        self.finish(step, tokens)

    def clean_pass(self) -> torch.Tensor:
        """Next-token logits of every row without steering (their keys and values join the cache)."""
        out = self.lm.run_with_hooks(
            self.x, self.mask, past_key_values=self.cache, use_cache=True, return_type="logits"
        )
        return out[:, -1].float().cpu()

    def plan(self, clean: torch.Tensor) -> _Step:
        """Split each row's requests by their gates: the clean group keeps the row, other groups fork."""
        m0 = generation_margin(clean, self.vid, self.classes).double()
        mass = torch.softmax(clean, -1)[:, self.verb_tensor].sum(-1)
        source, action, groups, forks = [], [], [], []
        for r, ms in enumerate(self.members):
            by = _by_action(self.requests.configs, ms, float(mass[r]))
            acts = sorted(by, key=lambda a: a is not None)  # the clean group first
            source.append(r), action.append(acts[0]), groups.append(by[acts[0]])
            forks += [(r, act, by[act]) for act in acts[1:]]
        kept = len(source)
        for r, act, ms in forks:
            source.append(r), action.append(act), groups.append(ms)
        return _Step(clean, m0, mass, source, action, groups, kept)

    def steer(self, step: _Step, steered: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Probe and steer the output rows ``steered`` on a copy of their cache rows without the
        clean pass's position; returns their logits and strengths."""
        rows_of = step.src[torch.tensor(steered)]
        sub = _rows_without_last(self.cache, rows_of.to(self.lm.device))
        x, mask = self.x[rows_of], self.mask[rows_of]
        probe = torch.tensor([step.action[j][0] for j in steered], dtype=torch.float64)
        epsilon = torch.tensor([step.action[j][1] for j in steered], dtype=torch.float64)
        cap = torch.tensor(
            [step.action[j][2] if step.action[j][2] is not None else float("inf") for j in steered], dtype=torch.float64
        )
        hidden = self.sub_step(x, mask, sub, probe, "hidden")
        m1 = _verb_margin(self.lm.token_logits(hidden, list(self.vid)), self.classes).cpu().double()
        s = _strength(step.m0[rows_of], m1, probe, epsilon, cap)
        sub.crop(-1)
        logits = self.sub_step(x, mask, sub, s, "logits").float().cpu()
        self.keep_steered(step, steered, sub, rows_of)
        return logits, s

    def sub_step(self, x, mask, sub, s: torch.Tensor, return_type: str) -> torch.Tensor:
        """The steered rows' last position at strengths ``s``, on their own cache ``sub``."""
        return self.lm.run_with_hooks(
            x,
            mask,
            past_key_values=sub,
            use_cache=True,
            return_type=return_type,
            fwd_hooks=[(self.hook, steer_hook(self.core, s.float()))],
        )[:, -1]

    def keep_steered(self, step: _Step, steered: list[int], sub, rows_of: torch.Tensor) -> None:
        """Put the steered keys and values of ``sub`` in the cache: in place of the clean pass's
        position for rows whose members were all steered, as new rows for the forks."""
        device = self.lm.device
        kept = [k for k, j in enumerate(steered) if j < step.kept]
        if kept:
            part = _rows_without_last(sub, torch.tensor(kept, device=device), crop=False)
            _replace_last(self.cache, part, rows_of[kept].to(device))
        new = [k for k, j in enumerate(steered) if j >= step.kept]
        if new:
            _append_rows(self.cache, _rows_without_last(sub, torch.tensor(new, device=device), crop=False))

    def fork(self, step: _Step) -> None:
        """Generators, decoding and mask rows of the forks, appended in the order of their cache rows."""
        forks = range(step.kept, len(step.source))
        self.gens = self.gens + [_clone(self.gens[step.source[j]]) for j in forks]
        self.greedy = self.greedy + [self.greedy[step.source[j]] for j in forks]
        self.mask = torch.cat([self.mask, self.mask[step.src[step.kept :]]], dim=0)

    def emit(self, step: _Step, logits: torch.Tensor, strength: torch.Tensor) -> torch.Tensor:
        """Choose each output row's token and record the step in the requests it serves."""
        margin = generation_margin(logits, self.vid, self.classes)
        tokens = torch.empty(len(step.source), dtype=torch.long)
        for j, ms in enumerate(step.groups):
            r = step.source[j]
            token = _choose(logits[j], self.greedy[j], self.temperature, self.top_k, self.gens[j])
            tokens[j] = token
            clean_token = int(step.clean[r].argmax())
            values = {
                "tokens": token,
                "pieces": self.lm.tokenizer.decode([token]),
                "gated": step.action[j] is not None,
                "strength": float(strength[j]),
                "clean_margin": float(step.m0[r]),
                "margin": float(margin[j]),
                "clean_token": clean_token,
                "verb": _number(token, self.vid, self.classes),
                "clean_verb": _number(clean_token, self.vid, self.classes),
                "verb_mass": float(step.mass[r]),
            }
            for m in ms:
                _record(self.outs[m], values)
        return tokens

    def finish(self, step: _Step, tokens: torch.Tensor) -> None:
        """The drawn tokens become the next inputs; requests at their budget or at the
        end-of-text token stop, and rows left without requests leave the batch."""
        groups = [[m for m in ms if not self.done(m)] for ms in step.groups]
        keep = [j for j, ms in enumerate(groups) if ms]
        self.x = tokens[:, None]
        self.mask = torch.cat([self.mask, torch.ones((len(step.source), 1), dtype=self.mask.dtype)], dim=1)
        if len(keep) < len(groups) and keep:
            self.cache.batch_select_indices(torch.tensor(keep, device=self.lm.device))
            self.x, self.mask = self.x[keep], self.mask[keep]
            self.gens, self.greedy = [self.gens[j] for j in keep], [self.greedy[j] for j in keep]
        self.members = [groups[j] for j in keep]

    def done(self, m: int) -> bool:
        """Whether request ``m`` has all its tokens or has written the end-of-text token."""
        g = self.outs[m]
        return len(g.tokens) >= self.requests.budget[m] or (self.eos is not None and g.tokens[-1] == self.eos)


def inversion_stats(generations: list[Generation], classes: TokenClasses) -> dict:
    """Agreement decisions and inversions over steered generations.

    A step is an *agreement decision* when the clean greedy token or the emitted token is one of
    the classes' tokens (the four agreement verbs), whether or not the gate opened: a verb written
    at a step the gate left alone is a decision steering missed, so a stricter gate cannot raise
    the rate by skipping verbs. At every step the clean pass prefers one class (the sign of its
    generation margin); a decision is *inverted* when the emitted token belongs to the class the
    clean pass disfavoured. The stricter ``rate_clean_verbs`` counts only the decisions whose
    clean greedy token is a verb (the verbs the model would have written). ``classes`` are those
    the generations were made with (:data:`TokenClasses`).

    Returns counts, both rates (None without decisions), the decisions at steps the gate left
    alone (``ungated_decisions``) and the number of steered steps.
    """
    negative, positive = check_classes(classes)
    decisions = inverted = strict = strict_inverted = steered = ungated = 0
    for g in generations:
        for gated, m0, clean_verb, verb in zip(g.gated, g.clean_margin, g.clean_verb, g.verb):
            steered += gated
            if clean_verb is None and verb is None:
                continue
            flipped = verb is not None and verb == (negative if m0 > 0 else positive)
            decisions += 1
            inverted += flipped
            ungated += not gated
            if clean_verb is not None:
                strict += 1
                strict_inverted += flipped
    return {
        "decisions": decisions,
        "inverted": inverted,
        "ungated_decisions": ungated,
        "steered_steps": steered,
        "rate": inverted / decisions if decisions else None,
        "clean_verb_decisions": strict,
        "clean_verbs_inverted": strict_inverted,
        "rate_clean_verbs": strict_inverted / strict if strict else None,
    }


def word_inversion_stats(generations: list[Generation], counterpart: dict[int, int]) -> dict:
    """How often a generation wrote the other-number form of a number-marked word.

    ``counterpart`` maps the token id of each form (e.g. " has") to its counterpart's
    (" have") and back. A step is a *decision* when its clean greedy token is one of these
    words, i.e. the model would have written it; it is *inverted* when the emitted token is that
    word's counterpart. Unsteered sampled generations give the rate that sampling alone produces.
    """
    decisions = inverted = 0
    for g in generations:
        for clean, token in zip(g.clean_token, g.tokens):
            if clean in counterpart:
                decisions += 1
                inverted += token == counterpart[clean]
    return {"decisions": decisions, "inverted": inverted, "rate": inverted / decisions if decisions else None}
