"""Adaptive steering of one language model along its agreement core (Figure 6, the gate table).

:func:`steering_run` continues the steering and control prompts, unsteered and steered at every
gate of the grid, greedily and by sampling, in one batch (:func:`corelib.steering.generate_batch`),
and counts the verb inversions and those of other number-marked words; :func:`flip_demo` shows
the four verbs' probabilities with the core flipped. The run is a typed
:class:`~corelib.experiments.subject_verb_agreement_steering_records.SteeringRun`, stored as its
JSON form. :func:`gate_table` and :func:`control_summary` read a run, typed or as stored. The core
and its layer come from the layer sweep (:mod:`corelib.experiments.subject_verb_agreement_layers`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import torch

from ..ace import Core
from ..interventions import intervention_hook
from ..lm import LanguageModel
from ..models import resid_hook
from ..steering import Generation, SteeringConfig, generate_batch, inversion_stats, word_inversion_stats
from ..tasks.sva import (
    AGREEMENT_VERBS,
    FLIP_DEMO_PROMPTS,
    NUMBER_WORD_PAIRS,
)
from .subject_verb_agreement_layers import core_of
from .subject_verb_agreement_steering_records import FlipExample, SteeringRun

if TYPE_CHECKING:
    import pandas

    from .subject_verb_agreement import SVAParams
    from .subject_verb_agreement_records import LayerSweepAnalysis


STEERING_PROMPTS = (
    # the reference code's demonstration prompts (the paper's Figure 6 shows two), then ours
    "As a new field of research, artificial intelligence",
    "We hold these truths to be self-evident:",
    "Scientific research",
    "The keys to the cabinet",
    "The author of the books",
    "The children in the garden",
    "The man with the two dogs",
    "The teachers of the student",
    "The women near the door",
    "The mouse behind the boxes",
    "The results of the experiment",
    "The pilot of the planes",
    "My friends from school",
    "The list of names",
)


CONTROL_PROMPTS = (
    "1, 2, 3, 4, 5,",
    "Monday, Tuesday, Wednesday,",
    "January, February, March,",
    "a, b, c, d, e,",
    "10, 20, 30, 40,",
    "red, orange, yellow, green,",
    "2, 4, 6, 8,",
    "one, two, three, four,",
    "Mercury, Venus, Earth, Mars,",
    "apple, banana, cherry,",
    "Paris, London, Berlin,",
    "import numpy as np\nimport",
)


GATE_GRID = (0.1, 0.2, 0.3, 0.5)


def number_word_counterparts(lm: LanguageModel) -> dict[int, int]:
    """Token id -> counterpart id for the pairs of :data:`corelib.tasks.sva.NUMBER_WORD_PAIRS`
    that are single tokens of ``lm`` (a pair with a multi-token form is left out)."""
    out = {}
    for singular, plural in NUMBER_WORD_PAIRS:
        try:
            a, b = lm.single_token(singular), lm.single_token(plural)
        except ValueError:
            continue
        out[a], out[b] = b, a
    return out


@torch.no_grad()
def flip_demo(lm: LanguageModel, core: Core, layer: int, prompts=FLIP_DEMO_PROMPTS) -> list[FlipExample]:
    """The four verbs' probabilities at the end of each prompt, unmodified and with the core flipped.

    Probabilities are over the whole vocabulary (softmax of the last token's logits); the flip
    is the centred reflection at the core's layer, last token only.
    """
    ids = lm.readout_ids
    rows = []
    hook = intervention_hook(core, "flip", centered=True, positions="last")
    for prompt in prompts:
        batch = lm.tokenize([prompt])
        row = {}
        for name, hooks in (("baseline", []), ("flip", [(resid_hook(layer), hook)])):
            logits = lm.run_with_hooks(batch.input_ids, batch.attention_mask, fwd_hooks=hooks)[0, -1]
            probs = torch.softmax(logits.cpu().double(), -1)
            row[name] = {verb.strip(): float(probs[i]) for verb, i in ids.items()}
        rows.append(FlipExample(prompt=prompt, **row))
    return rows


def steering_run(
    lm: LanguageModel, analysis: LayerSweepAnalysis | dict, params: SVAParams, *, progress: bool = True
) -> SteeringRun:
    """Base and steered generations of the steering and control prompts, at every gate.

    Greedy continuations of the steering and control prompts are generated unsteered (once) and
    steered at every gate of ``params.gates``; every steering prompt is also continued ``n_samples``
    times by sampling (temperature, top-k), unsteered and steered at ``params.gate``, each sample with
    its own seed. All run as one batch (:func:`corelib.steering.generate_batch`; the requests of
    a prompt and seed share a row until their gates disagree). The pairs of ``params.gate`` are stored
    under ``greedy``, ``sampled`` and ``control``; the steered texts of every gate under
    ``gate_sweep``. Inversion rates (:func:`corelib.steering.inversion_stats`) are given for the
    greedy and the sampled generations, with the unsteered samples' rate (what sampling alone
    does) beside them; ``other_words`` does the same for number-marked words other than the four
    verbs; ``flip_demo`` holds :func:`flip_demo`. The run is assembled in its stored form and read
    through :meth:`SteeringRun.from_json`, so what is returned is what a stored run reads back as.
    """
    core, layer = core_of(analysis), analysis["chosen_layer"]
    plan = _SteeringPlan.of(params)
    requests = plan.requests(params)
    gens = generate_batch(
        lm,
        [r.prompt for r in requests],
        classes=AGREEMENT_VERBS,
        core=core,
        layer=layer,
        configs=[r.config for r in requests],
        max_new_tokens=[r.new_tokens for r in requests],
        greedy=[r.greedy for r in requests],
        temperature=params.temperature,
        top_k=params.top_k,
        seed=[r.seed for r in requests],
        progress=progress,
    )
    out = plan.arrange(gens, params)
    out |= _inversions(lm, out, plan.sampled(gens, params))
    out["flip_demo"] = [example.to_json() for example in flip_demo(lm, core, layer)]
    return SteeringRun.from_json(out)


class _Request(NamedTuple):
    """One generation of :func:`steering_run`: prompt, steering (None: plain), length, decoding, seed."""

    prompt: str
    config: SteeringConfig | None
    new_tokens: int
    greedy: bool
    seed: int


@dataclass(frozen=True)
class _SteeringPlan:
    """The generations of :func:`steering_run`, in the order of the batch: the greedy steering and
    control prompts unsteered, then steered at each gate, then the samples unsteered and steered."""

    greedy_jobs: list[tuple[str, str, int]]  # (prompt, "greedy" | "control", new tokens)
    samples: list[tuple[str, int]]  # (steering prompt, seed)

    @classmethod
    def of(cls, params: SVAParams) -> _SteeringPlan:
        jobs = [(q, "greedy", params.max_new_tokens) for q in params.steering_prompts]
        jobs += [(q, "control", params.control_new_tokens) for q in params.control_prompts]
        samples = [(q, params.generation_seed + k) for q in params.steering_prompts for k in range(params.n_samples)]
        return cls(jobs, samples)

    def requests(self, params: SVAParams) -> list[_Request]:
        seed = params.generation_seed
        out = [_Request(q, None, n, True, seed) for q, _, n in self.greedy_jobs]
        out += [_Request(q, params.steering_at(g), n, True, seed) for g in params.gates for q, _, n in self.greedy_jobs]
        out += [
            _Request(q, cfg, params.max_new_tokens, False, s)
            for cfg in (None, params.steering)
            for q, s in self.samples
        ]
        return out

    def sampled(self, gens: list[Generation], params: SVAParams) -> tuple[list[Generation], list[Generation]]:
        """The sampled generations: unsteered, and steered at ``params.gate``."""
        tail = gens[len(self.greedy_jobs) * (len(params.gates) + 1) :]
        return tail[: len(self.samples)], tail[len(self.samples) :]

    def arrange(self, gens: list[Generation], params: SVAParams) -> dict:
        """The generations as :func:`steering_run` stores them (see there)."""
        n = len(self.greedy_jobs)
        base_s, steered_s = self.sampled(gens, params)
        dicts = [g.to_dict() for g in gens]
        base, by_gate = dicts[:n], {g: dicts[n * (k + 1) : n * (k + 2)] for k, g in enumerate(params.gates)}
        out = {
            "gate": float(params.gate),
            "greedy": [],
            "control": [],
            "sampled": [
                {"base": b.to_dict(), "steered": s.to_dict(), "seed": seed}
                for b, s, (_, seed) in zip(base_s, steered_s, self.samples)
            ],
            "gate_sweep": {str(g): {"greedy": [], "control": []} for g in params.gates},
        }
        for k, (_, kind, _) in enumerate(self.greedy_jobs):
            out[kind].append({"base": base[k], "steered": by_gate[float(params.gate)][k]})
            for g in params.gates:
                out["gate_sweep"][str(g)][kind].append(by_gate[g][k])
        return out


def _inversions(lm: LanguageModel, out: dict, sampled: tuple[list[Generation], list[Generation]]) -> dict:
    """Inversion rates of the verbs and of other number-marked words, and what steering did to the controls."""
    base_s, steered_s = sampled
    counterpart = number_word_counterparts(lm)
    greedy_steered = [Generation(**g["steered"]) for g in out["greedy"]]
    control_steered = [Generation(**g["steered"]) for g in out["control"]]
    return {
        "inversion": inversion_stats(greedy_steered, AGREEMENT_VERBS),
        "sampled_inversion": {
            "steered": inversion_stats(steered_s, AGREEMENT_VERBS),
            "unsteered": inversion_stats(base_s, AGREEMENT_VERBS),
        },
        "other_words": {
            "words": sorted(lm.tokenizer.decode([i]) for i in counterpart),
            "greedy": word_inversion_stats(greedy_steered, counterpart),
            "sampled": {
                "steered": word_inversion_stats(steered_s, counterpart),
                "unsteered": word_inversion_stats(base_s, counterpart),
            },
        },
        "control_unchanged": sum(g["base"]["tokens"] == g["steered"]["tokens"] for g in out["control"]),
        "control_steered_steps": inversion_stats(control_steered, AGREEMENT_VERBS)["steered_steps"],
        "n_control": len(out["control"]),
    }


def gate_table(steering: SteeringRun | dict) -> pandas.DataFrame:
    """Per gate threshold: agreement decisions and inversions on the steering prompts, and the
    control continuations left unchanged (:func:`control_summary`). Whether a row meets the
    steering criteria is the claims' question (:func:`corelib.plots.meets_steering_criteria`).

    One row per gate of the grid, indexed by ``gate`` (ascending), with the columns
    ``decisions``, ``inverted``, ``inversion rate`` (missing, NaN or None, without a decision), ``clean-verb rate``,
    ``decisions not steered``, ``steered steps``, ``decision-free controls``,
    ``decision-free unchanged``, ``controls`` and ``controls unchanged`` (counts and shares).
    """
    import pandas as pd

    rows = [_gate_row(float(gate), steered, steering["control"]) for gate, steered in steering["gate_sweep"].items()]
    return pd.DataFrame(rows).set_index("gate").sort_index()


def _gate_row(gate: float, steered: dict, control_pairs: list[dict]) -> dict:
    """One row of :func:`gate_table`: the greedy and control continuations steered at ``gate``."""
    inv = inversion_stats([Generation(**g) for g in steered["greedy"]], AGREEMENT_VERBS)
    pairs = [{"base": pair["base"], "steered": s} for pair, s in zip(control_pairs, steered["control"])]
    ctl = control_summary({"control": pairs})
    return {
        "gate": gate,
        "decisions": inv["decisions"],
        "inverted": inv["inverted"],
        "inversion rate": inv["rate"],
        "clean-verb rate": inv["rate_clean_verbs"],
        "decisions not steered": inv["ungated_decisions"],
        "steered steps": inv["steered_steps"],
        "decision-free controls": ctl.decision_free,
        "decision-free unchanged": ctl.decision_free_unchanged,
        "controls": ctl.n,
        "controls unchanged": ctl.unchanged,
    }


@dataclass(frozen=True, eq=False)  # a DataFrame has no single truth value: compare the fields
class ControlSummary:
    """What steering did to the control continuations (:func:`control_summary`).

    Attributes:
        n: control prompts.
        decision_free: those whose unsteered text writes none of the four verbs.
        decision_free_unchanged: of those, the ones steering left unchanged.
        unchanged: all controls left unchanged.
        table: one row per control, in the order of the prompts, with the columns ``prompt``,
            ``unchanged`` (bool), ``verbs in base text`` (bool), ``first steered step`` (the
            0-based step of the first steered token) and ``base text up to it``; the last two are
            missing (NaN) when steering never acted.
    """

    n: int
    decision_free: int
    decision_free_unchanged: int
    unchanged: int
    table: pandas.DataFrame


def control_summary(steering: SteeringRun | dict) -> ControlSummary:
    """What steering did to the control continuations.

    A control continuation has *no agreement decision* when its unsteered (base) text contains
    none of the four verbs; those must come out unchanged. For every changed continuation, the
    first steered step and the base text up to it (the token the gate reacted to).
    """
    rows, free, free_same = [], 0, 0
    for pair in steering["control"]:
        base, steered = pair["base"], pair["steered"]
        same = base["tokens"] == steered["tokens"]
        decision_free = all(v is None for v in base["verb"])
        free += decision_free
        free_same += decision_free and same
        first = next((k for k, g in enumerate(steered["gated"]) if g), None)
        rows.append(
            {
                "prompt": base["prompt"],
                "unchanged": same,
                "verbs in base text": not decision_free,
                "first steered step": first,
                "base text up to it": None if first is None else "".join(base["pieces"][: first + 1]),
            }
        )
    import pandas as pd

    columns = ["prompt", "unchanged", "verbs in base text", "first steered step", "base text up to it"]
    return ControlSummary(
        n=len(rows),
        decision_free=free,
        decision_free_unchanged=free_same,
        unchanged=sum(r["unchanged"] for r in rows),
        table=pd.DataFrame(rows, columns=columns),
    )
