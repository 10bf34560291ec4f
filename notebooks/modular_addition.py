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
# # Modular addition: a core crystallises at grokking
#
# Transformers trained on $a + b \equiv c \pmod p$ famously **grok** {cite:p}`power2022grokking`:
# they fit the training pairs early, sit at chance on the held-out pairs for hundreds of epochs,
# and then suddenly generalise. Earlier work found, by hypothesising it and then probing for it,
# that the generalising solution is a Fourier "clock" {cite:p}`nanda2023progress`: the model
# represents residues as rotations. Here we let ACE find the computation without saying what to
# look for. This chapter reproduces the paper's Figure 2:
#
# 1. a low-dimensional core **forms at grokking**, together with the jump in test accuracy;
# 2. after grokking that core is **necessary and sufficient**: keeping only it preserves accuracy,
#    removing it drops accuracy to chance;
# 3. a linear operator fitted to the "add one" shift in core coordinates has eigenvalues that
#    **snap onto the unit circle** at grokking: a rotation, found by least squares alone.
#
# The next chapter follows the same models for much longer, to see whether the core inflates.
#
# Three two-block transformers train together in one vectorised model (see
# `corelib.engine`). The parameters are the paper's but for a shorter horizon (the `paper` profile
# restores it). Where the paper is silent, the
# model follows the reference implementation's layer, PyTorch's post-norm encoder layer, which
# also applies dropout 0.1 during training. That setting matters more than its silence in the
# paper suggests: trained without dropout (`-p dropout 0`), the same models grok much later,
# and their loss keeps spiking long after they fit the training set.
# The paper trains for {glue:text}`paper_epochs` epochs; this build trains
# {glue:text}`epochs_run` (the last section of the claims page lists how long each chapter
# took); where the repository keeps a recorded run at the paper's settings, the section on the
# paper's claims uses it. Try another modulus with
# `python -m acebook.runner run modular_addition -p p 59`.
#
# {glue:text}`cost`

# %% tags=["parameters"]
p = 53                 # the modulus (also the vocabulary size)
train_fraction = 0.5   # share of the p^2 pairs used for training
split_seed = 42        # permutation of the pairs before the split
seeds = [1031, 1032, 1033]  # one model per seed
epochs = 1200          # horizon of this chapter (paper: 2000)
batch_size = 512
lr = 1e-3
weight_decay = 1.0
d_model = 128
n_heads = 4
d_ff = 512
n_layers = 2
dropout = 0.1          # in training only (PyTorch's layer default)
snapshot_every = 100   # analyse the models every this many epochs
snapshot_every_late = 500  # after late_after (the next chapter's run)
late_after = 2000
eval_every = 10        # test accuracy every this many epochs
precision = "fp32"     # or "bf16": training passes in bfloat16
n_jacobians = 64       # Jacobian samples per ACE (the reference: 1000)
energy = 0.99          # energy threshold of the initial core rank

# %% tags=["hide-input"]
from myst_nb import glue

from acebook.run_times import cost_sentence

glue("cost", cost_sentence("modular_addition"), display=False)

# %%
import matplotlib.pyplot as plt
from IPython.display import display
from myst_nb import glue

from acebook.claims_page import chapter_frame
from corelib import claims, plots
from corelib.experiments import modular, paper_scale

params = modular.ModularParams.from_namespace(globals())
# The next chapter's longer run: changes nothing this chapter measures.
UNUSED_HERE = (*modular.LONG_RUN_SETTINGS, "eval_every")

# %% [markdown]
# ## The task and the models
#
# Every pair $(a, b)$ becomes the two-token input $[a, b]$; the model must output
# $c = (a+b) \bmod p$ at the last position. All $p^2$ pairs are shuffled once and split in half:
# the models train on one half and are tested on the other, so a model can only score on the test
# half by computing the sum. Chance accuracy is $1/p$.
#
# Each model has two transformer blocks (width 128, four heads, MLP width 512) and is trained with
# AdamW and weight decay 1. The three seeds share nothing but the data: each has its own
# initialisation, data order and optimizer state.

# %%
data = modular.make_data(params)
n_train, n_test = len(data["train"][0]), len(data["test"][0])
print(f"p = {p}: {n_train} training pairs, {n_test} test pairs, "
      f"chance accuracy {1 / p:.3f}")

# %% [markdown]
# ## Training and the analysis of every snapshot
#
# `modular.analyse_arm` trains the models (or reuses a finished run), keeps their weights every
# {glue:text}`snapshot_every` epochs, and analyses each snapshot of each model on the test set:
#
# - **ACE** on the last-position output $\mathbf h$ of block 2, with the logits as target, and
#   the rank that keeps {glue:text}`energy_pct` % of the activity × relevance energy;
# - **causal refinement** of that rank: the *necessary* rank is the smallest rank (at least the
#   energy rank) whose removal $\mathbf h - \mathbf P\mathbf h$ drops test accuracy to $2/p$, the
#   *sufficient* rank the smallest whose core-only model $\mathbf P\mathbf h$ keeps the model's
#   accuracy. The **core dimension** is the necessary rank. Both are found by trying ranks in
#   increasing order (`interventions.refine_rank`), not by bisection: once the removal has taken
#   the answer out, accuracy hovers around chance and can cross $2/p$ again at larger ranks, and a
#   bisection may land on such a later crossing;
# - a **shift operator**: the mean core coordinate $\bar{\mathbf r}_c$ of the test examples with
#   answer $c$, and the least-squares operator with
#   $\bar{\mathbf r}_{(c+1) \bmod p} \approx \mathbf A \bar{\mathbf r}_c$. If the core adds by
#   rotating, $\mathbf A$ is a rotation and its eigenvalues lie on the unit circle.
#
# Everything is saved per snapshot, so rebuilding the book never retrains.

# %%
records = modular.analyse_arm(params, "wd", epochs)
summary = modular.emergence_summary(params, records)
claims.record(  # for the claims page
    "modular_addition", modular.emergence_claim_values(summary),
    settings=claims.deviations(params, modular.ModularParams(),
                               ignore=UNUSED_HERE))

# %% [markdown]
# ## The figure

# %% tags=["hide-input"]
history = modular.history(params, "wd", until=epochs)
fig = plots.figure_emergence(records, history, summary, p=p)
glue("fig_modular", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_modular
# :name: fig-modular
#
# **Modular-addition cores form at grokking and implement a rotation.** (A) Test accuracy (red,
# left axis) and core dimension (grey, right axis), mean ± sem over the models; the dotted line
# marks the grokking epoch. (B) Test accuracy of the full, core-only and core-removed models at the
# last epoch, against chance ($1/p$, dotted) and the removal threshold $2/p$ (dashed). (C)
# Eigenvalues of the shift operator of each model before, at and after grokking; the grey ring is
# the band within $\sin(\pi/p)$ of the unit circle.
# ```

# %%
# the next chapter's paper-scale run continues these models
recorded = paper_scale.recorded_inflation()
wd = {"wd": records}
agreement = paper_scale.inflation_agreement(params, wd, recorded)
paper_scale.record_claims("modular_addition", recorded)

# %% tags=["hide-input"]
values = modular.emergence_glue_values(params, summary, recorded,
                                      agreement)
for name, value in values.items():
    glue(name, value, display=False)

# %% [markdown]
# **(A) Grokking and the core.** The models reach 99 % test accuracy at epochs
# {glue:text}`model_groks` (first analysed snapshot), so all {glue:text}`n_models` have grokked by
# epoch {glue:text}`grok_epoch` (the paper saw about 800); they end at no less than
# {glue:text}`final_acc_min:.3f`. Before that they have memorised the training half while scoring
# at or below chance on the test half. Because the models grok at different times, panel C and
# the numbers below take each model at its own epochs: before grokking (the snapshot nearest half
# its grokking epoch: {glue:text}`epoch_before`), at grokking ({glue:text}`epoch_at`) and at the
# end ({glue:text}`epoch_after`). The cores have {glue:text}`dim_before` dimensions before,
# {glue:text}`dim_at` at grokking and {glue:text}`dim_after` at the end. Before grokking these
# numbers mean little: there is no accuracy to keep or to remove.
#
# **(B) Necessary and sufficient.** From the grokking epoch on, the core-only model keeps at
# least {glue:text}`keep_ratio_min:.3f` of each model's accuracy, and removing the core leaves at
# most {glue:text}`remove_max:.3f` (chance is $2/p =$ {glue:text}`chance2:.3f` by the paper's
# threshold). At the last epoch the sufficient ranks are {glue:text}`suff_final` and the energy
# ranks {glue:text}`energy_final`.
#
# **(C) The rotation.** Before grokking {glue:text}`frac_before:.0f` % of the eigenvalues of the
# shift operators lie within $\sin(\pi/p)$ of the unit circle; at grokking
# {glue:text}`frac_at:.0f` %, after it {glue:text}`frac_after:.0f` %. The operator was fitted
# with no knowledge of rotations: least squares on centroids found that adding one is a rotation
# of the core.
#
# ## Which rotations?
#
# An eigenvalue $e^{i\theta}$ of the shift operator on the unit circle is a rotation by $\theta$
# per added unit. For the operator to return to its start after $p$ steps, $\theta$ must be a
# multiple of $2\pi/p$: $\theta = 2\pi k/p$ for a **frequency** $k$. Conjugate pairs
# $e^{\pm i\theta}$ are one rotation, so frequencies $k$ and $p-k$ count once; there are
# $\lfloor p/2 \rfloor$ possible non-zero frequencies. The **mode count** is the number of
# distinct frequencies present. One frequency suffices to add mod $p$; the models use
# {glue:text}`modes_at` at grokking and {glue:text}`modes_after` at epoch {glue:text}`epoch_after`,
# and they need not agree on which:

# %%
display(modular.phase_table(records, summary))

# %% [markdown]
# The last column, $R^2_h$, checks that the operator describes the shift rather than memorising
# centroids: it is fitted with a contiguous block of about 7.5 % of the classes left out and
# scored only on the transitions inside that block.
#
# ## The paper's claims
#
# {glue:text}`rec_status` {glue:text}`rec_agreement`
#
# This chapter's rows of the [claims page](claims.ipynb), with the tolerance each must meet and
# where it comes from. Only a run at the paper's settings can reproduce a claim.

# %%
display(chapter_frame("modular_addition"))

# %% [markdown]
# ## Exercises
#
# ```{exercise}
# :label: ex-modular-circle
#
# A shift operator $\mathbf A$ satisfies $\mathbf A^p \bar{\mathbf r}_c = \bar{\mathbf r}_c$ for
# every class $c$ when it is exact. What does this imply for its eigenvalues, and why does that
# make the bins $k = \operatorname{round}(\theta p / 2\pi)$ natural?
# ```
#
# ````{solution} ex-modular-circle
# :class: dropdown
#
# If the centroids span the core, $\mathbf A^p = \mathbf I$ on the core, so every eigenvalue
# satisfies $\lambda^p = 1$: it is a $p$-th root of unity $e^{2\pi i k/p}$. A fitted operator is
# only approximately exact, so its eigenvalues land near these roots, and rounding the angle to
# the nearest multiple of $2\pi/p$ names the root.
# ````
#
# ```{exercise}
# :label: ex-modular-modes
#
# Plant a clock by hand: build centroids $\bar{\mathbf r}_c = (\cos(2\pi k c/p), \sin(2\pi k c/p))$
# for the frequencies $k \in \{3, 50\}$ with $p = 53$ (stack the two pairs into a 4-D vector),
# fit the shift operator with `corelib.operators.fit_shift_operator` and list its rotational modes
# with `corelib.operators.rotational_modes`. How many modes do you get, and why?
# ```
#
# ````{solution} ex-modular-modes
# :class: dropdown
#
# ```python
# import numpy as np
# from corelib import operators
#
# def planted_modes(p=53, freqs=(3, 50)):
#     c = np.arange(p)[:, None]
#     r = np.concatenate([np.c_[np.cos(2 * np.pi * k * c / p), np.sin(2 * np.pi * k * c / p)]
#                         for k in freqs], axis=1)
#     fit = operators.fit_shift_operator(r)
#     return operators.rotational_modes(fit.eigenvalues, p)
#
# planted_modes()  # array([3])
# ```
#
# **One** mode. Frequency 50 is frequency $53 - 50 = 3$ turning the other way:
# $\cos(2\pi \cdot 50 c/53) = \cos(2\pi \cdot 3c/53)$ and $\sin(2\pi \cdot 50c/53) =
# -\sin(2\pi \cdot 3c/53)$, so the 4-D centroids span only a plane. The SVD step keeps those
# two dimensions, the operator is a single rotation by $2\pi \cdot 3/53$ (one conjugate pair),
# and its bin folds to 3.
# ````
#
# ```{exercise}
# :label: ex-modular-prime
#
# Rerun the chapter with a smaller modulus, e.g. `-p p 31 -p epochs 1500`. Before running it,
# predict: does grokking come earlier or later, and how many rotational modes can there be at
# most?
# ```
#
# ````{solution} ex-modular-prime
# :class: dropdown
#
# At most $\lfloor 31/2 \rfloor = 15$ modes. The chapter "Grokking theory" predicts that
# grokking is *slower* for smaller $p$: fewer equivalent Fourier modes share the work of
# building the margin, so weight decay needs longer to redistribute it (the delay grows like
# $1/p$ for large $p$ and diverges as $p$ approaches a critical modulus).
# ````
