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
from dataclasses import asdict, dataclass, field

import torch
from tqdm.auto import tqdm
from transformers.cache_utils import DynamicLayer

from .ace import Core
from .lm import LanguageModel
from .models import resid_hook
from .tasks.sva import AGREEMENT_VERBS

__all__ = [
    "Generation",
    "SteeringConfig",
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
        gate: minimal probability mass on the four verbs for a step to be steered.
        probe: strength of the probing pass that measures the local gain.
        epsilon: buffer of the margin crossing (logit units).
        cap: largest allowed ``|s|`` (None: no cap).
    """

    gate: float = 0.2
    probe: float = 0.2
    epsilon: float = 1.0
    cap: float | None = 50.0

    def __post_init__(self):
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


def generation_margin(logits: torch.Tensor, verb_ids: dict[str, int]) -> torch.Tensor:
    """``logsumexp(are, were) - logsumexp(is, was)`` of next-token logits (..., vocab)."""
    return _verb_margin({v: logits[..., i] for v, i in verb_ids.items()})


@dataclass
class Generation:
    """A generated continuation and what happened at each step.

    ``tokens`` are the new token ids; ``pieces`` their text. Per step: ``gated`` (an agreement
    decision was steered), ``strength`` (s*), ``clean_margin`` and ``margin`` (generation
    margins of the clean and the used logits), ``clean_token`` (the greedy choice of the clean
    pass), ``verb`` / ``clean_verb``: "singular", "plural" or None for the emitted and the
    clean greedy token, and ``verb_mass``: the clean pass's probability on the four verbs (what
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


def _number(token: int, verb_ids: dict[str, int]) -> str | None:
    for number, verbs in AGREEMENT_VERBS.items():
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
        core=core,
        layer=layer,
        configs=[config if core is not None else None],
        max_new_tokens=max_new_tokens,
        greedy=greedy,
        temperature=temperature,
        top_k=top_k,
        seed=seed,
    )[0]


def _verb_margin(verbs: dict[str, torch.Tensor]) -> torch.Tensor:
    """The generation margin from the four verb logits (:meth:`LanguageModel.token_logits`)."""
    plural = torch.stack([verbs[v] for v in AGREEMENT_VERBS["plural"]], -1)
    singular = torch.stack([verbs[v] for v in AGREEMENT_VERBS["singular"]], -1)
    return torch.logsumexp(plural.float(), -1) - torch.logsumexp(singular.float(), -1)


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
    prompt. ``progress`` shows a bar over steps.
    """
    n_req = len(prompts)
    if isinstance(prompts, str) or n_req == 0:
        raise ValueError("prompts must be a non-empty list of strings")
    configs = _per_row(configs, n_req, "configs")
    budget = [int(n) for n in _per_row(max_new_tokens, n_req, "max_new_tokens")]
    greedy = [bool(g) for g in _per_row(greedy, n_req, "greedy")]
    seeds = [int(v) for v in _per_row(seed, n_req, "seed")]
    steering = any(c is not None for c in configs)
    if steering and (core is None or layer is None):
        raise ValueError("steered rows need the core and its layer (core=..., layer=...)")
    if steering and not 0 <= layer < lm.n_layers:
        raise ValueError(f"layer must be in [0, {lm.n_layers - 1}] for {lm.name}, got {layer}")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    for prompt in prompts:
        n = len(lm.encode(prompt))
        if n < 2:
            raise ValueError(
                f"prompt {prompt!r} is {n} token(s) long; generation needs at least two (the prefix is cached)"
            )
    outs = [Generation(p) for p in prompts]
    # one row per prompt and decoding; its members are the requests it serves
    keys = list(dict.fromkeys((p, g, v) for p, g, v, n in zip(prompts, greedy, seeds, budget) if n > 0))
    if not keys:
        return outs
    members = [[i for i in range(n_req) if (prompts[i], greedy[i], seeds[i]) == k and budget[i] > 0] for k in keys]
    batch = lm.tokenize([k[0] for k in keys])
    cache = lm.prefix_cache(batch)
    mask = batch.attention_mask.clone()
    x = batch.input_ids[:, -1:].clone()
    gens = [torch.Generator().manual_seed(k[2]) for k in keys]
    row_greedy = [k[1] for k in keys]
    vid = {verb: lm.single_token(verb) for verbs in AGREEMENT_VERBS.values() for verb in verbs}
    verb_tensor = torch.tensor(list(vid.values()))
    name = resid_hook(layer) if steering else None
    eos = lm.tokenizer.eos_token_id

    bar = tqdm(total=max(budget), desc=f"{lm.name}: generation", disable=not progress, leave=False)
    with _OneThreadForSmallBatches(lm.device, len(keys)), bar:
        while members:
            bar.update()
            clean = (
                lm.run_with_hooks(x, mask, past_key_values=cache, use_cache=True, return_type="logits")[:, -1]
                .float()
                .cpu()
            )
            m0 = generation_margin(clean, vid).double()
            mass = torch.softmax(clean, -1)[:, verb_tensor].sum(-1)
            # each row's members by what this step does to them: None (clean) or the steering
            # settings of an open gate; the clean group keeps the row, other groups fork
            source, action, groups = [], [], []
            forks = []
            for r, ms in enumerate(members):
                by = {}
                for m in ms:
                    c = configs[m]
                    gated = c is not None and float(mass[r]) >= c.gate
                    by.setdefault((c.probe, c.epsilon, c.cap) if gated else None, []).append(m)
                acts = sorted(by, key=lambda a: a is not None)  # the clean group first
                for k, act in enumerate(acts):
                    if k == 0:
                        source.append(r), action.append(act), groups.append(by[act])
                    else:
                        forks.append((r, act, by[act]))
            rows = len(source)
            for r, act, ms in forks:
                source.append(r), action.append(act), groups.append(ms)
            src = torch.tensor(source)
            logits = clean[src].clone()
            strength = torch.zeros(len(source), dtype=torch.float64)
            steered = [j for j, act in enumerate(action) if act is not None]
            if steered:
                sel = torch.tensor(steered)
                rows_of = src[sel]
                sub = _rows_without_last(cache, rows_of.to(lm.device))
                probe = torch.tensor([action[j][0] for j in steered], dtype=torch.float64)
                epsilon = torch.tensor([action[j][1] for j in steered], dtype=torch.float64)
                cap = torch.tensor(
                    [action[j][2] if action[j][2] is not None else float("inf") for j in steered], dtype=torch.float64
                )

                def sub_step(s, return_type, x=x[rows_of], mask=mask[rows_of], sub=sub):
                    """The steered rows' last position at strength ``s``, on their own cache."""
                    return lm.run_with_hooks(
                        x,
                        mask,
                        past_key_values=sub,
                        use_cache=True,
                        return_type=return_type,
                        fwd_hooks=[(name, steer_hook(core, s.float()))],
                    )[:, -1]

                m1 = _verb_margin(lm.token_logits(sub_step(probe, "hidden"), list(vid))).cpu().double()
                base = m0[rows_of]
                gain = (m1 - base) / probe
                target = torch.where(base > 0, -epsilon, epsilon)
                s = torch.where(gain != 0, (target - base) / torch.where(gain != 0, gain, 1.0), 0.0)
                s = torch.minimum(torch.maximum(s, -cap), cap)
                sub.crop(-1)
                logits[sel] = sub_step(s, "logits").float().cpu()
                strength[sel] = s
                kept = [k for k, j in enumerate(steered) if j < rows]
                if kept:  # rows whose members were all steered: replace their last position
                    part = _rows_without_last(sub, torch.tensor(kept, device=lm.device), crop=False)
                    _replace_last(cache, part, rows_of[kept].to(lm.device))
                new = [k for k, j in enumerate(steered) if j >= rows]
                if new:  # forks: new rows
                    _append_rows(cache, _rows_without_last(sub, torch.tensor(new, device=lm.device), crop=False))
            # forks were appended in the order of ``steered`` beyond ``rows``: the same order
            gens = gens + [_clone(gens[source[j]]) for j in range(rows, len(source))]
            row_greedy = row_greedy + [row_greedy[source[j]] for j in range(rows, len(source))]
            mask = torch.cat([mask, mask[src[rows:]]], dim=0)
            margin = generation_margin(logits, vid)
            tokens = torch.empty(len(source), dtype=torch.long)
            for j, ms in enumerate(groups):
                r = source[j]
                token = _choose(logits[j], row_greedy[j], temperature, top_k, gens[j])
                tokens[j] = token
                clean_token = int(clean[r].argmax())
                piece = lm.tokenizer.decode([token])
                for m in ms:
                    g = outs[m]
                    g.tokens.append(token)
                    g.pieces.append(piece)
                    g.gated.append(action[j] is not None)
                    g.strength.append(float(strength[j]))
                    g.clean_margin.append(float(m0[r]))
                    g.margin.append(float(margin[j]))
                    g.clean_token.append(clean_token)
                    g.verb.append(_number(token, vid))
                    g.clean_verb.append(_number(clean_token, vid))
                    g.verb_mass.append(float(mass[r]))
            groups = [
                [
                    m
                    for m in ms
                    if len(outs[m].tokens) < budget[m] and not (eos is not None and outs[m].tokens[-1] == eos)
                ]
                for ms in groups
            ]
            keep = [j for j, ms in enumerate(groups) if ms]
            x = tokens[:, None]
            mask = torch.cat([mask, torch.ones((len(source), 1), dtype=mask.dtype)], dim=1)
            if len(keep) < len(groups) and keep:
                cache.batch_select_indices(torch.tensor(keep, device=lm.device))
                x, mask = x[keep], mask[keep]
                gens, row_greedy = [gens[j] for j in keep], [row_greedy[j] for j in keep]
            members = [groups[j] for j in keep]
    return outs


def inversion_stats(generations: list[Generation]) -> dict:
    """Agreement decisions and inversions over steered generations.

    A step is an *agreement decision* when the clean greedy token or the emitted token is one of
    the four verbs, whether or not the gate opened: a verb written at a step the gate left alone
    is a decision steering missed, so a stricter gate cannot raise the rate by skipping verbs.
    At every step the clean pass prefers one number (the sign of its generation margin); a
    decision is *inverted* when the emitted token is a verb of the number the clean pass
    disfavoured. The stricter ``rate_clean_verbs`` counts only the decisions whose clean greedy
    token is a verb (the verbs the model would have written).

    Returns counts, both rates (None without decisions), the decisions at steps the gate left
    alone (``ungated_decisions``) and the number of steered steps.
    """
    decisions = inverted = strict = strict_inverted = steered = ungated = 0
    for g in generations:
        for gated, m0, clean_verb, verb in zip(g.gated, g.clean_margin, g.clean_verb, g.verb):
            steered += gated
            if clean_verb is None and verb is None:
                continue
            flipped = verb is not None and verb == ("singular" if m0 > 0 else "plural")
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
