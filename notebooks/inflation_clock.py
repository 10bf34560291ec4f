# ---
# jupyter:
#   corelib_inputs: [recorded]
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Beyond the paper: the clock of core inflation and the interpretability window
#
# The paper ends with two ideas that it does not test. This chapter tests both with the
# machinery of the previous ones: the same modular-addition models, seeds and snapshot
# analysis as the chapter on core inflation.
#
# 1. **The clock.** The grokking theory of the paper says that its relaxation time scales as
#    $\Omega \propto (\eta\omega)^{-1}$, learning rate times weight decay. The reason is
#    mechanical: AdamW multiplies every weight by $1 - \eta\omega$ at each step, so after $n$
#    steps the decay has acted for a rescaled time $\tau = \eta\omega n$. If core inflation runs
#    on the same clock, runs at different $(\eta, \omega)$ fall on one curve when plotted
#    against $\tau$, and a run at six times the paper's $\eta\omega$ reaches the paper's
#    20 000-epoch state ($\tau = 60$) in a sixth of the epochs.
# 2. **The interpretability window.** The paper proposes to anneal weight decay toward zero
#    shortly after the models grok, to keep the compact core that forms there. It only ran an
#    abrupt switch at epoch 900. Here the run branches at grokking into weight decay kept,
#    removed at once, annealed linearly to zero over two spans, and removed late, after the core
#    has grown: does a late removal deflate it again?
#
# These are findings of this book, not claims of the paper: the claims page lists them in a
# section of their own. Three seeds per setting can show a large effect and its direction; they
# cannot pin down a small one, and the chapter says so where it matters.
#
# {glue:text}`cost`

# %% tags=["parameters"]
p = 53
train_fraction = 0.5
split_seed = 42
seeds = [1031, 1032, 1033]
batch_size = 512
d_model = 128
n_heads = 4
d_ff = 512
n_layers = 2
dropout = 0.1
precision = "fp32"     # or "bf16": training passes in bfloat16
eval_every = 10
n_jacobians = 64
energy = 0.99
grok_threshold = 0.99
# (lr, wd) pairs; the paper's run is (1e-3, 1.0)
pairs = [[1e-3, 3.0], [2e-3, 3.0], [3e-3, 2.0]]
horizon = 60.0           # tau at which the pairs' runs end
window_pair = [3e-3, 2.0]  # the clock of the window's arms
window_horizon = 12.0    # tau at which the window's arms end
anneal = [1.5, 6.0]      # tau of the ramps (paper clock: 500, 2000 ep.)
late_removal = 9.0       # tau of the late removal
window_branch = None     # tau of the branch; None: at grokking
snapshot_unit = 100      # snapshot interval at the paper's lr x wd
use_record = True        # show a recorded run of exactly these settings
check_epochs = 238       # epochs of that record re-derived and compared

# %% tags=["hide-input"]
from myst_nb import glue

from acebook.run_times import cost_sentence

glue("cost", cost_sentence("inflation_clock"), display=False)

# %%
import matplotlib.pyplot as plt

from corelib import claims, plots
from corelib.experiments import clock, paper_scale

params = clock.ClockParams.from_namespace(globals())

# %% [markdown]
# ## One clock for several runs
#
# Each $(\eta, \omega)$ pair trains the three models of the previous chapters, with weight
# decay throughout, and analyses its snapshots as the core-inflation chapter does. A pair's
# snapshots follow the paper's schedule scaled to its clock (every 100 epochs at the paper's
# $\eta\omega$, every $100/k$ at $k$ times it), so every run is looked at the same number of
# times per unit of $\tau$. At the paper's $(\eta, \omega)$ this is exactly the run of the
# previous chapters, which is read back, not trained again. The recorded paper-profile run of
# the core-inflation chapter, when present, joins the comparison with its full 20 000 epochs
# ($\tau$ from 0 to 60); it then stands for the paper's $(\eta, \omega)$. This build's
# settings have {glue:text}`n_pairs` pairs, each run to $\tau =$ {glue:text}`horizon`; the
# runs, with their $\eta\omega$ relative to the paper's, are listed below the figure.
#
# `clock.run` returns the curves, the summaries and the measure of collapse described below,
# for every pair and the window's arms (the next section). Its book settings train for longer
# than this chapter's share of the book's time, so they were run once and recorded
# (`recorded/`). When a record of exactly the chapter's settings is present and
# `use_record` is on, `clock.run` shows the record, and trains only its first `check_epochs`
# epochs again from scratch (the run the window branches from, then the arm without weight
# decay) to compare them with it. Any other settings are trained and analysed here.

# %%
recorded = paper_scale.recorded_inflation()
record = paper_scale.recorded_clock(params) if use_record else None
summary = clock.run(
    params, recorded, record=record, check_epochs=check_epochs
)

# %% [markdown]
# {glue:text}`record_text`

# %% tags=["hide-input"]
values = clock.glue_values(
    params,
    summary["clock"],
    summary["window"],
    summary["record"],
    searched=use_record,
)
for name, value in values.items():
    glue(name, value, display=False)

# %% tags=["hide-input"]
fig = plots.figure_clock(summary)
glue("fig_clock", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_clock
# :name: fig-clock
#
# **Core dimension, necessary − sufficient gap and rotational modes of each run**, mean ± sem
# over seeds, against epochs (top) and against $\tau = \eta\omega \times$ steps (bottom). The
# title of each bottom panel gives the ratio of the spreads (bottom over top): below 1 the runs
# come together when rescaled.
# ```
#
# {glue:text}`runs_text`
#
# **Does one clock fit?** The spread of a set of curves is the root mean square, over their
# common range, of the standard deviation across runs of their seed means: zero when they lie on
# one curve. Each curve counts from its run's grokking snapshot on: memorisation need not
# follow the decay's clock, and inflation comes after grokking. Measured against epochs and
# against $\tau$, the ratio of the two spreads says how much the rescaling brings the runs
# together. The seed noise, the standard error of a three-seed mean, is the floor below which
# no spread can be told apart from chance.
#
# - Core dimension: the curves {glue:text}`collapse_core_dim` (ratio
#   {glue:text}`ratio_core_dim`; seed noise {glue:text}`noise_core_dim`).
# - Necessary − sufficient gap: they {glue:text}`collapse_gap` (ratio
#   {glue:text}`ratio_gap`; seed noise {glue:text}`noise_gap`).
# - Rotational modes: they {glue:text}`collapse_modes` (ratio
#   {glue:text}`ratio_modes`; seed noise {glue:text}`noise_modes`).
#
# **Against the paper-scale run.** {glue:text}`recorded_text` {glue:text}`same_epoch_text`
# {glue:text}`conclusion_text`
#
# A ratio well below 1 says that $\eta\omega$ sets the pace; it does not say that $\eta$ and
# $\omega$ matter only through their product. Runs with the same product and different
# $\eta / \omega$ test that. {glue:text}`same_product_text` The early part of each curve,
# memorisation and grokking, need not follow the same clock: the gradient steps that fit the
# training set scale with $\eta$ alone.

# %% [markdown]
# ## The interpretability window
#
# The window's arms run on the clock of {glue:text}`window_pair`. They branch at epoch
# {glue:text}`window_grok` ($\tau =$ {glue:text}`window_tau_grok`), the first snapshot at
# which every model has grokked (test accuracy at least the threshold), with a fresh
# optimizer as in the paper's arm; the late removal branches from the kept run where $\tau$
# reaches the parameter `late_removal`. Annealing lowers the weight decay linearly to zero over
# the parameter `anneal`, given in $\tau$ (its defaults, 1.5 and 6, are 500 and 2 000 epochs on
# the paper's clock): the
# first epoch after the branch still trains at the full decay, the last one of the ramp at a
# small fraction of it.
#
# Every branch starts with a fresh AdamW, as the paper's arm does, and the first steps of a
# fresh AdamW move every weight by about $\eta$ whatever its gradient. So one more arm keeps the
# decay and only restarts the optimizer: the `restarted` arm is the control the others are
# compared with, since the uninterrupted `kept` run has no such restart. And once the decay is
# off, $\tau$ stops: what happens after a removal runs on the learning rate alone, so a fast
# clock with a larger $\eta$ also moves faster there, and the window's arms on a fast clock are
# not a rescaled copy of the same arms on the paper's.

# %% tags=["hide-input"]
fig = plots.figure_window(summary)
glue("fig_window", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_window
# :name: fig-window
#
# **The window's arms**: core dimension, rotational modes and test accuracy, mean ± sem over
# seeds; each arm's branch is dotted in its colour.
# ```
#
# - {glue:text}`window_restarted`.
# - {glue:text}`window_removed`.
# - {glue:text}`window_anneal_short`.
# - {glue:text}`window_anneal_long`.
# - {glue:text}`window_late_removal`.
#
# The ranges over the three seeds, in brackets, say how far apart the arms must be before a
# difference means anything: only arms whose ranges do not overlap are told apart here. Read
# that way: {glue:text}`window_verdict` The window the paper proposes would show as cores that
# stay near their size at grokking in the annealed arms while those of the arms with decay grow.
# The loss spikes are counted per model and per 1 000 epochs from the branch at grokking to the
# end (the late removal from its own branch).

# %%
claims.record_findings(
    "inflation_clock",
    clock.findings(params, summary["clock"], summary["window"]),
    settings=clock.settings_text(params, summary["record"]),
)

# %% [markdown]
# ## Exercises
#
# ```{exercise}
# :label: ex-clock-epochs
#
# How many epochs does a run at $\eta = 3\cdot10^{-3}$, $\omega = 2$ need to reach the
# $\tau$ of the paper's epoch 20 000, and how many at $\eta = 10^{-3}$, $\omega = 3$? Compute
# both with `clock.epochs_for` and check them by hand: the paper's run takes 3 optimizer steps
# per epoch (1 404 training pairs in batches of 512).
# ```
#
# ````{solution} ex-clock-epochs
# :class: dropdown
#
# ```python
# from corelib.experiments import clock
#
# params = clock.ClockParams()
# paper_tau = float(clock.tau_of(params, 1e-3, 1.0, 20000))
# fast = clock.epochs_for(params, 3e-3, 2.0, paper_tau)
# slow = clock.epochs_for(params, 1e-3, 3.0, paper_tau)
# by_hand = 20000 / 6, 20000 / 3
# ```
#
# $\tau = 10^{-3} \cdot 1 \cdot 3 \cdot 20\,000 = 60$. Six times the rate needs a sixth of the
# steps, 3 333 epochs; three times the rate, 6 667. Only if the clock holds do these runs end
# where the paper's ended.
# ````
