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
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch

from .ace import Core
from .lm import AGREEMENT_VERBS, LanguageModel, resid_hook

__all__ = ["Generation", "SteeringConfig", "generate", "generation_margin", "steer_hook",
           "inversion_stats"]


@dataclass(frozen=True)
class SteeringConfig:
    """Settings of the adaptive steering.

    Attributes:
        gate: minimal probability mass on the four verbs for a step to be steered.
        probe: strength of the probing pass that measures the local gain.
        epsilon: buffer of the margin crossing (logit units).
        cap: largest allowed ``|s|`` (None: no cap).
    """

    gate: float = 0.1
    probe: float = 0.25
    epsilon: float = 6.0
    cap: float | None = 8.0

    def __post_init__(self):
        if not 0 <= self.gate <= 1:
            raise ValueError(f"gate is a probability mass in [0, 1], got {self.gate}")
        if self.probe <= 0:
            raise ValueError(f"probe strength must be positive, got {self.probe}")
        if self.epsilon < 0:
            raise ValueError(f"epsilon must be non-negative, got {self.epsilon}")
        if self.cap is not None and self.cap <= 0:
            raise ValueError(f"cap must be positive or None, got {self.cap}")


def steer_hook(core: Core, strength: float):
    """Hook ``fn(act, hook)`` moving the last position by ``strength`` times the core flip."""

    def fn(act: torch.Tensor, hook=None) -> torch.Tensor:
        h = act[:, -1]
        out = act.clone()
        out[:, -1] = h + strength * (core.flip(h, centered=True) - h)
        return out

    return fn


def generation_margin(logits: torch.Tensor, verb_ids: dict[str, int]) -> torch.Tensor:
    """``logsumexp(are, were) - logsumexp(is, was)`` of next-token logits (..., vocab)."""
    plural = torch.stack([logits[..., verb_ids[v]] for v in AGREEMENT_VERBS["plural"]], -1)
    singular = torch.stack([logits[..., verb_ids[v]] for v in AGREEMENT_VERBS["singular"]], -1)
    return torch.logsumexp(plural, -1) - torch.logsumexp(singular, -1)


@dataclass
class Generation:
    """A generated continuation and what happened at each step.

    ``tokens`` are the new token ids; ``pieces`` their text. Per step: ``gated`` (an agreement
    decision was steered), ``strength`` (s*), ``clean_margin`` and ``margin`` (generation
    margins of the clean and the used logits), ``clean_token`` (the greedy choice of the clean
    pass) and ``verb`` / ``clean_verb``: "singular", "plural" or None for the emitted and the
    clean greedy token.
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


def _choose(logits: torch.Tensor, greedy: bool, temperature: float, top_k: int,
            gen: torch.Generator) -> int:
    if greedy:
        return int(logits.argmax())
    values, idx = torch.topk(logits.float().cpu() / temperature, min(top_k, logits.shape[-1]))
    return int(idx[torch.multinomial(torch.softmax(values, -1), 1, generator=gen)])


class _single_thread:
    """One intra-op thread on the CPU while decoding: one-token passes are too small to gain
    from threads, and on a busy machine synchronising threads costs several times the work."""

    def __init__(self, device: torch.device):
        self.active = device.type == "cpu"

    def __enter__(self):
        if self.active:
            self.threads = torch.get_num_threads()
            torch.set_num_threads(1)

    def __exit__(self, *exc):
        if self.active:
            torch.set_num_threads(self.threads)


@torch.no_grad()
def generate(lm: LanguageModel, prompt: str, *, core: Core | None = None, layer: int | None = None,
             config: SteeringConfig = SteeringConfig(), max_new_tokens: int = 50,
             greedy: bool = True, temperature: float = 1.0, top_k: int = 50,
             seed: int = 0) -> Generation:
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
    if core is not None and not 0 <= layer < lm.n_layers:
        raise ValueError(f"layer must be in [0, {lm.n_layers - 1}] for {lm.name}, got {layer}")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    ids = lm.encode(prompt)
    if len(ids) < 2:
        raise ValueError(f"prompt {prompt!r} is {len(ids)} token(s) long; generation needs at "
                         "least two (the prefix is cached)")
    batch = lm.tokenize([prompt])
    cache = lm.prefix_cache(batch)
    gen = torch.Generator().manual_seed(int(seed))
    vid = lm.verb_ids
    verb_tensor = torch.tensor(list(vid.values()))
    name = resid_hook(layer) if core is not None else None
    out = Generation(prompt)
    seq = list(ids)
    eos = lm.tokenizer.eos_token_id

    def step(hooks):
        x = torch.tensor([[seq[-1]]])
        mask = torch.ones((1, len(seq)), dtype=torch.long)
        return lm.run_with_hooks(x, mask, past_key_values=cache, use_cache=True,
                                 return_type="logits", fwd_hooks=hooks)[0, -1].float().cpu()

    with _single_thread(lm.device):
        for _ in range(max_new_tokens):
            clean = step([])
            logits, strength, gated = clean, 0.0, False
            m0 = float(generation_margin(clean, vid))
            if core is not None and float(torch.softmax(clean, -1)[verb_tensor].sum()) >= config.gate:
                gated = True
                cache.crop(-1)
                m1 = float(generation_margin(step([(name, steer_hook(core, config.probe))]), vid))
                gain = (m1 - m0) / config.probe
                target = -config.epsilon if m0 > 0 else config.epsilon
                strength = (target - m0) / gain if gain != 0 else 0.0
                if config.cap is not None:
                    strength = max(-config.cap, min(config.cap, strength))
                cache.crop(-1)
                logits = step([(name, steer_hook(core, strength))])
            token = _choose(logits, greedy, temperature, top_k, gen)
            clean_token = int(clean.argmax())
            out.tokens.append(token)
            out.pieces.append(lm.tokenizer.decode([token]))
            out.gated.append(gated)
            out.strength.append(float(strength))
            out.clean_margin.append(m0)
            out.margin.append(float(generation_margin(logits, vid)))
            out.clean_token.append(clean_token)
            out.verb.append(_number(token, vid))
            out.clean_verb.append(_number(clean_token, vid))
            seq.append(token)
            if eos is not None and token == eos:
                break
    return out


def inversion_stats(generations: list[Generation]) -> dict:
    """Agreement decisions and inversions over steered generations.

    At a steered step the clean pass prefers one number (the sign of its generation margin).
    The step is an *agreement decision* when the clean greedy token or the emitted token is one
    of the four verbs, and it is *inverted* when the emitted token is a verb of the number the
    clean pass disfavoured. The stricter ``rate_clean_verbs`` counts only the decisions whose
    clean greedy token is a verb (the verbs the model would have written).

    Returns counts, both rates (None without decisions) and the number of steered steps.
    """
    decisions = inverted = strict = strict_inverted = steered = 0
    for g in generations:
        for gated, m0, clean_verb, verb in zip(g.gated, g.clean_margin, g.clean_verb, g.verb):
            if not gated:
                continue
            steered += 1
            flipped = verb is not None and verb == ("singular" if m0 > 0 else "plural")
            if clean_verb is not None or verb is not None:
                decisions += 1
                inverted += flipped
            if clean_verb is not None:
                strict += 1
                strict_inverted += flipped
    return {"decisions": decisions, "inverted": inverted, "steered_steps": steered,
            "rate": inverted / decisions if decisions else None,
            "clean_verb_decisions": strict, "clean_verbs_inverted": strict_inverted,
            "rate_clean_verbs": strict_inverted / strict if strict else None}
