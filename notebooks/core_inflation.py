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
# # Core inflation: does weight decay keep adding rotations?
#
# The previous chapter stopped shortly after grokking, when the cores were compact. What happens
# if training simply continues? The paper trained the same three models for 20 000 epochs and
# found that, under weight decay, the cores keep **growing**, from about 15 to about 60
# dimensions, while the number of dimensions the models actually *need* stays put. This chapter
# repeats that experiment (the paper's Figure 3) with a controlled comparison:
#
# - the **weight decay kept** arm continues the run of the previous chapter;
# - the **weight decay removed** arm is a copy of the same models at epoch
#   {glue:text}`branch_epoch`, continued with weight decay 0 and a fresh optimizer.
#
# The two arms differ in more than the decay: the removed arm also restarts AdamW, whose first
# steps move every weight by about the learning rate. The next chapter adds the missing control,
# an arm that restarts the optimizer and keeps the decay.
#
# The book's build trains a shorter horizon than the paper (parameter `long_epochs`) and reports
# where the trend stands at its end; the paper's full 20 000 epochs of both arms, many hours on a
# laptop CPU, were run once with the `paper` profile and are shown beside it, recorded. The
# chapter also counts the frequencies the models use without fitting an operator, which shows
# which arm's representation actually spreads.
#
# {glue:text}`cost`

# %% tags=["parameters"]
p = 53
train_fraction = 0.5
split_seed = 42
seeds = [1031, 1032, 1033]
long_epochs = 1200       # horizon of this chapter (paper: 20000)
branch_epoch = 900       # where the no-weight-decay arm branches off
batch_size = 512
lr = 1e-3
weight_decay = 1.0
branch_weight_decay = 0.0
d_model = 128
n_heads = 4
d_ff = 512
n_layers = 2
dropout = 0.1            # in training only (PyTorch's layer default)
snapshot_every = 100     # analysis interval up to late_after
snapshot_every_late = 500  # analysis interval after late_after
late_after = 2000
eval_every = 10
precision = "fp32"  # or "bf16": training passes in bfloat16
n_jacobians = 64
energy = 0.99

# %% tags=["hide-input"]
from myst_nb import glue

from acebook.run_times import cost_sentence

glue("cost", cost_sentence("core_inflation"), display=False)

# %%
import matplotlib.pyplot as plt
from IPython.display import display
from myst_nb import glue

from acebook.claims_page import chapter_frame
from corelib import claims, plots
from corelib.experiments import modular, paper_scale

params = modular.ModularParams.from_namespace(globals())

# %% [markdown]
# ## Two arms from one run
#
# `modular.analyse_arm(params, arm, long_epochs)` extends the weight-decay run of the previous
# chapter to `long_epochs` (the engine resumes from its last checkpoint; nothing already trained
# is redone), branches the second arm from the snapshot at epoch {glue:text}`branch_epoch`, and
# analyses every snapshot of both arms exactly as before: ACE, the necessary and sufficient
# ranks, and the shift operator with its rotational modes.

# %%
arms = {arm: modular.analyse_arm(params, arm, long_epochs)
        for arm in modular.ARMS}
summary = modular.inflation_summary(params, arms["wd"], arms["no_wd"])

# %% [markdown]
# ## The figure

# %% tags=["hide-input"]
fig = plots.figure_inflation(arms, p=p, branch_epoch=branch_epoch)
glue("fig_inflation", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_inflation
# :name: fig-inflation
#
# **Core dimension and rotational modes with weight decay kept or removed** (the paper: weight
# decay inflates the cores). (A) Core dimension (necessary rank)
# of the models with weight decay kept (black) and removed at the dotted epoch (purple), mean ±
# sem. (B) Necessary (solid) and sufficient (dashed) dimensions, means over models. (C) Left:
# magnitudes of the shift operator of model 1 at the last epoch in each arm, on a common colour
# scale; right: number of rotational modes over time, against the maximum $\lfloor p/2 \rfloor$.
# ```

# %% [markdown]
# **(A) Inflation.** At epoch {glue:text}`start`, where the arms split, the cores have
# {glue:text}`wd_core_dim_start:.1f` dimensions on average. By epoch {glue:text}`end` the cores
# trained with weight decay have {glue:text}`wd_core_dim_end:.1f`; the cores trained without it
# have {glue:text}`no_core_dim_end:.1f`. Their mean test accuracies at that epoch are
# {glue:text}`wd_test_acc_end:.3f` and {glue:text}`no_test_acc_end:.3f` (a mean below
# {glue:text}`grok_threshold` means that some model is not doing the task at that snapshot; see
# the section on loss spikes).
# {glue:text}`verdict_dim` The section "What the necessary rank counts" below shows what sets
# these numbers at the end of the run.
#
# **(B) Redundancy, not need.** The paper finds that under weight decay the sufficient
# dimension, what the model needs to keep its accuracy, stays put while the necessary dimension,
# what must be removed before accuracy falls to chance, grows: the gap is redundancy, more and
# more directions each carrying a copy of the solution. Here the sufficient dimension goes from
# {glue:text}`wd_sufficient_rank_start:.1f` to {glue:text}`wd_sufficient_rank_end:.1f` and the
# necessary one from {glue:text}`wd_necessary_rank_start:.1f` to
# {glue:text}`wd_necessary_rank_end:.1f`: the gap {glue:text}`verdict_gap`.
#
# **(C) More rotations.** In the paper the shift operator gains rotational modes under weight
# decay, up to nearly all $\lfloor p/2 \rfloor$. Here the mode count goes from
# {glue:text}`wd_modes_start:.1f` to {glue:text}`wd_modes_end:.1f` on average with weight decay,
# and is {glue:text}`no_modes_end:.1f` at the end without it. {glue:text}`verdict_modes` The
# chapter "Grokking theory" explains the paper's long-run trend: with many equivalent Fourier
# modes available, weight decay lowers the weight norm by spreading the same margin over as many
# of them as possible; without weight decay nothing rewards the spreading. The drift is slow:
# the paper followed it for 20 000 epochs, and the `paper` profile does the same.
#
# ## Loss spikes
#
# Means over three models can hide an uneven run. Adaptive optimizers (Adam, AdamW) can throw a
# model that fits its training set perfectly off it within a few steps once its training loss is
# tiny: the loss jumps to about chance level and the model learns the set again, the *slingshot
# mechanism* {cite:p}`thilak2022slingshot`. A snapshot that falls inside such a spike analyses a
# model that, for the moment, does not do the task. The figure shows the training loss of every
# model; `modular.training_collapses` lists the episodes in which a model's training accuracy
# fell below {glue:text}`collapse_threshold` after it had first reached it, and
# `modular.collapse_summary` counts them.

# %%
collapse_threshold = 0.9
histories = {arm: modular.history(params, arm, until=summary["end"])
             for arm in modular.ARMS}

# %% tags=["hide-input"]
fig = plots.figure_spikes(histories, branch_epoch=branch_epoch)
glue("fig_spikes", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_spikes
# :name: fig-inflation-spikes
#
# **Training loss of each model in both arms** (log scale). Black: weight decay kept; purple:
# weight decay removed at the dotted epoch, with a fresh optimizer.
# ```
#
# Between the branch at epoch {glue:text}`branch_epoch` and epoch {glue:text}`end`,
# {glue:text}`wd_collapse_sentence`, and {glue:text}`no_collapse_sentence`. (A model that has
# not yet refitted its training set after the fresh optimizer's first steps at the branch is
# learning, not collapsing, and is not counted.) At epoch {glue:text}`end`,
# {glue:text}`wd_n_working_end` of the {glue:text}`n_models` weight-decay models do the task
# (test accuracy at least {glue:text}`grok_threshold`); over those alone, their cores have
# {glue:text}`wd_core_dim_end_working:.1f` dimensions and {glue:text}`wd_modes_end_working:.1f`
# rotational modes, against {glue:text}`no_core_dim_end_working:.1f` and
# {glue:text}`no_modes_end_working:.1f` without weight decay. The paper reports means over all
# models, and so do panels A–C and the claims below.
#
# ## What the necessary rank counts
#
# The core dimension of panel A is the necessary rank: the smallest rank $r$, at least the energy
# rank, whose removal drops test accuracy to $2/p$. That is a threshold on a curve, and the curve
# is worth seeing. `modular.removal_curves(params, arm, epoch)` removes the leading $r$
# directions of each model's full-rank core, for every $r$, and records the accuracy that is
# left. The figure shows these curves at epoch {glue:text}`end` in both arms, with a dot where the
# rank search stopped. To separate the bulk of a core from a thin residue, the code also reads
# off where each curve first falls to a looser level, {glue:text}`loose_level`.

# %%
loose_level = 0.1
curves = {arm: modular.removal_curves(params, arm, summary["end"])
          for arm in modular.ARMS}
claims.record(  # for the claims page
    "core_inflation", modular.inflation_claim_values(summary),
    notes=modular.inflation_notes(params, summary, curves, loose_level),
    settings=claims.deviations(params, modular.ModularParams(),
                               ignore=["eval_every"]))

# %% tags=["hide-input"]
necessary = {arm: modular.necessary_ranks(arms[arm], summary["end"])
             for arm in modular.ARMS}
fig = plots.figure_removal(curves, necessary, chance=params.chance_level,
                           loose_level=loose_level, epoch=summary["end"])
glue("fig_removal", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_removal
# :name: fig-inflation-removal
#
# **How accuracy falls as the core is removed**, at the last epoch, for each model with weight
# decay kept (A) and removed (B). Dashed: the threshold $2/p$ of the necessary rank; dotted: the
# looser level {glue:text}`loose_level`; dots: the necessary rank found by the chapter's search
# (log scale).
# ```
#
# With weight decay kept, the necessary ranks at epoch {glue:text}`end` are
# {glue:text}`wd_necessary_end_list`, and removal first leaves at most {glue:text}`loose_level` at
# ranks {glue:text}`wd_loose_end_list`. With weight decay removed, the necessary ranks are
# {glue:text}`no_necessary_end_list` and the looser level is reached at ranks
# {glue:text}`no_loose_end_list`. Compare the two readings arm by arm: a model whose curve
# drops to the looser level early but then lingers a few points above $2/p =$
# {glue:text}`chance_level:.3f` keeps a thin residue of the answer spread over many weak
# directions, and that residue, not the bulk of its core, sets its necessary rank. The paper's
# threshold is $2/p$, and panel A uses it; the exercise below asks how the comparison of the arms
# depends on it.
#
# ## How many frequencies?
#
# The mode count of panel C depends on two choices: the core the operator lives in, and a linear
# fit that must explain the whole cycle. A second count needs neither. Take the class centroids of
# the block's *whole* output (the mean activation over the test examples with answer $c$) and
# Fourier-transform them along the cycle $c = 0, \dots, p - 1$: a representation that computes
# with the frequencies $k$ puts its variance across answers at those $k$
# (`operators.cycle_spectrum`). `operators.frequency_count` is the fewest frequencies that hold a
# share {glue:text}`frequency_share` of that variance, and `modular.centroid_spectra` does this for
# every snapshot of an arm. Each frequency takes two dimensions, a cosine and a sine, so this
# count also bounds how small a core that keeps the representation can be.

# %%
frequency_share = 0.9
spectra = {arm: modular.centroid_spectra(params, arm, summary["end"],
                                         share=frequency_share)
           for arm in modular.ARMS}

# %% tags=["hide-input"]
fig = plots.figure_frequencies(spectra, share=frequency_share,
                               branch_epoch=branch_epoch)
glue("fig_frequencies", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_frequencies
# :name: fig-inflation-frequencies
#
# **Fourier content of the class centroids of the block's output.** (A) The fewest frequencies
# that hold {glue:text}`frequency_share` of the variance across answers, mean ± sem over
# models, with weight decay kept (black) and removed at the dotted epoch (purple). (B) At the
# last epoch, the share of that variance held by each model's $n$ largest frequencies; a curve
# crosses the dashed line at that model's count.
# ```
#
# Panel A first retells the previous chapter in these terms. At initialisation the centroids
# spread over {glue:text}`frequencies_init:.1f` of the {glue:text}`frequencies_max` frequencies
# on average; as the models grok, that falls to a handful. At the branch the models use
# {glue:text}`wd_frequencies_start:.1f` frequencies on average. At
# epoch {glue:text}`end` the models trained with weight decay use
# {glue:text}`wd_frequencies_end:.1f` and those trained without it
# {glue:text}`no_frequencies_end:.1f`: removing weight decay leaves
# {glue:text}`frequency_verdict`. Two forces pull in opposite directions here. In the grokking
# literature weight decay is what prunes a representation down to a few Fourier features
# {cite:p}`nanda2023progress`, so without it nothing removes features the model already has; in
# the paper, weight decay instead spreads the margin over more rotational modes. Every frequency
# takes two dimensions, so a representation that uses more of them needs a larger core. The two
# counts measure different things (frequencies of the whole representation here, rotations of a
# linear operator inside the core there). What this build cannot settle is how both counts move
# over the paper's longer horizon (the `paper` profile).
#
# ## At the paper's horizon: a recorded run
#
# The `paper` profile trains both arms for the paper's {glue:text}`paper_long_epochs` epochs:
# hours on a CPU, too long for every build of this book. It was run once, and its analysed
# snapshots are kept in the repository (`recorded/`, read by
# `corelib.experiments.paper_scale`). {glue:text}`rec_status`

# %%
recorded = paper_scale.recorded_inflation()
agreement = paper_scale.inflation_agreement(params, arms, recorded)
paper_scale.record_claims("core_inflation", recorded)

# %% tags=["hide-input"]
fig = plots.figure_recorded_inflation(recorded)
glue("fig_inflation_recorded", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_inflation_recorded
# :name: fig-inflation-recorded
#
# **The recorded paper-scale run**, drawn as {numref}`fig-inflation`: (A) core dimension, (B)
# necessary and sufficient dimensions, (C) shift operators at the last epoch and rotational
# modes over time.
# ```
#
# Over the paper's horizon, the cores trained with weight decay go from
# {glue:text}`rec_wd_core_dim_start` dimensions at epoch {glue:text}`rec_start` to
# {glue:text}`rec_wd_core_dim_end` at epoch {glue:text}`rec_end`, against
# {glue:text}`rec_no_core_dim_end` without weight decay (the paper: about 15 to about 60). The
# sufficient dimension goes from {glue:text}`rec_wd_sufficient_rank_start` to
# {glue:text}`rec_wd_sufficient_rank_end`, and the rotational modes from
# {glue:text}`rec_wd_modes_start` to {glue:text}`rec_wd_modes_end` with weight decay and to
# {glue:text}`rec_no_modes_end` without it (the paper: about 26, the most there are).
# {glue:text}`rec_verdict_dim` {glue:text}`rec_verdict_modes` Mean test accuracies at the end:
# {glue:text}`rec_wd_test_acc_end` and {glue:text}`rec_no_test_acc_end`.
#
# {glue:text}`rec_agreement`
#
# ## The paper's claims
#
# This chapter's rows of the [claims page](claims.ipynb). The paper's numbers are those of epoch
# {glue:text}`paper_long_epochs`. Where a recorded paper-scale run exists, the claims are judged
# on it, and the column "this build" gives what this build measured; a build with a shorter
# `long_epochs` alone is "measured at reduced settings": it shows how far the trend has come,
# and cannot reproduce or refute the paper's end point.

# %% tags=["hide-input"]
chapter = {"summary": summary, "arms": arms, "histories": histories,
           "curves": curves, "spectra": spectra,
           "collapse_threshold": collapse_threshold,
           "loose_level": loose_level,
           "frequency_share": frequency_share,
           "recorded": recorded, "agreement": agreement}
values = modular.inflation_glue_values(params, chapter)
for name, value in values.items():
    glue(name, value, display=False)

# %%
display(chapter_frame("core_inflation"))

# %% [markdown]
# ## Exercises
#
# ```{exercise}
# :label: ex-inflation-redundancy
#
# A model stores the same one-dimensional signal $s$ in $m$ orthogonal directions with equal
# weights, $\mathbf h = \frac{s}{\sqrt m} \sum_{i=1}^m \mathbf e_i$, and reads it out with
# $\mathbf w = \frac{1}{\sqrt m}\sum_i \mathbf e_i$. How many directions are *sufficient* to keep
# the sign of the read-out, and how many *necessary*, i.e. must be removed to destroy it?
# ```
#
# ````{solution} ex-inflation-redundancy
# :class: dropdown
#
# Keeping any single direction keeps the sign of $\mathbf w^\top \mathbf h$ (the value shrinks by
# $1/m$ but the sign, which decides the prediction, survives): one direction is sufficient.
# Removing any $m-1$ directions also leaves the sign, so all $m$ must be removed: $m$ directions
# are necessary. Redundant copies raise the necessary dimension and leave the sufficient one
# alone, as in panel B.
# ````
#
# ```{exercise}
# :label: ex-inflation-ranks
#
# Check your answer to the previous exercise with the same rank search the chapter uses. Build
# activations $\mathbf h = \frac{s}{\sqrt m}\sum_{i \le m} \mathbf e_i + \text{noise in the
# other directions}$ for random signs $s$, a core whose leading $m$ directions are
# $\mathbf e_1, \dots, \mathbf e_m$, and an "accuracy" that scores the sign of the read-out
# $\mathbf w^\top \mathbf h$. Pass it to `corelib.interventions.refine_rank` and find the necessary
# and sufficient ranks for $m = 1, \dots, 5$.
# ```
#
# ````{solution} ex-inflation-ranks
# :class: dropdown
#
# ```python
# import numpy as np
# from corelib.ace import Core
# from corelib.interventions import refine_rank
#
# def redundancy_ranks(m, d=16, n=400, seed=0):
#     rng = np.random.default_rng(seed)
#     basis = np.linalg.qr(rng.standard_normal((d, d)))[0]  # e_1..e_d, in a random frame
#     signs = rng.choice([-1.0, 1.0], size=n)
#     h = np.outer(signs, basis[:, :m].sum(axis=1)) / np.sqrt(m)
#     h += rng.standard_normal((n, d - m)) @ basis[:, m:].T  # noise the read-out ignores
#     w = basis[:, :m].sum(axis=1) / np.sqrt(m)
#     core = Core(basis, np.arange(d, 0, -1.0), np.zeros(d))
#
#     def accuracy(c, mode):  # a read-out of (numerically) zero decides nothing: wrong
#         return float(np.mean(signs * (getattr(c, mode)(h) @ w) > 1e-9))
#
#     return refine_rank(core, accuracy, baseline=accuracy(core, "keep"), chance_level=0.5)
#
# [redundancy_ranks(m) for m in range(1, 6)]  # (necessary, sufficient) = (m, 1)
# ```
#
# Necessary rank $m$, sufficient rank 1, for every $m$: the gap between the two is the number of
# redundant copies, which is what panel B measures in the trained models.
# ````
#
# ```{exercise}
# :label: ex-inflation-count
#
# Using the saved results (`arms` above), plot the necessary minus the sufficient dimension over
# time for each arm. Where does the difference start to grow?
# ```
#
# ````{solution} ex-inflation-count
# :class: dropdown
#
# ```python
# for arm, recs in arms.items():
#     gap = modular.series(recs, "necessary_rank") - modular.series(recs, "sufficient_rank")
#     plt.plot(modular.epochs_of(recs), np.nanmean(gap, axis=1), label=arm)
# plt.legend(); plt.xlabel("epoch"); plt.ylabel("necessary − sufficient")
# ```
#
# The paper finds the gap widening under weight decay and steady without it. In this build the
# mean gap goes from {glue:text}`wd_gap_start:.1f` at epoch {glue:text}`start` to
# {glue:text}`wd_gap_end:.1f` at epoch {glue:text}`end` with weight decay, and to
# {glue:text}`no_gap_end:.1f` without it.
# ````
#
# ```{exercise}
# :label: ex-inflation-threshold
#
# The necessary rank depends on its threshold. Using `curves`, `modular.first_rank_at_or_below`
# and `modular.mean_rank` from the section "What the necessary rank counts", compute the mean
# core dimension of each arm at the last epoch for the thresholds $2/p$, 0.05 and
# {glue:text}`loose_level`. Does the arm without weight decay have the smaller core at every
# threshold?
# ```
#
# ````{solution} ex-inflation-threshold
# :class: dropdown
#
# ```python
# for level in (params.chance_level, 0.05, loose_level):
#     means = {arm: modular.mean_rank(modular.first_rank_at_or_below(c, level)) for arm, c in curves.items()}
#     print(f"threshold {level:.3f}: " + ", ".join(f"{arm} {m:.1f}" for arm, m in means.items()))
# ```
#
# In this build, {glue:text}`threshold_comparison`. A threshold close to chance counts every
# direction that still carries a trace of the answer; a higher one counts the directions that
# carry most of it. Where the two arms swap order, their difference lies in the residue, not in
# the bulk of the core.
# ````
#
# ```{exercise}
# :label: ex-inflation-harmonics
#
# The frequency count of the section "How many frequencies?" counts more than rotations. Take
# one rotation, $k = 3$ on $p = 53$ answers, but rectify it: the centroid of answer $c$ is
# $\big(\max(0, \cos\theta_c), \max(0, \sin\theta_c)\big)$ with $\theta_c = 2\pi k c / p$.
# How many frequencies hold 90 % of its variance, and which? Compute it with
# `operators.cycle_spectrum` and `operators.frequency_count`, then check the shares against the
# Fourier series of a rectified cosine.
# ```
#
# ````{solution} ex-inflation-harmonics
# :class: dropdown
#
# ```python
# import numpy as np
# from corelib.operators import cycle_spectrum, frequency_count
#
# def rectified_spectrum(k=3, p=53):
#     theta = 2 * np.pi * k * np.arange(p) / p
#     return cycle_spectrum(np.stack([np.maximum(0, np.cos(theta)), np.maximum(0, np.sin(theta))], axis=1))
#
# shares = rectified_spectrum()
# n = frequency_count(shares, 0.9)
# largest = np.argsort(shares)[::-1][:n] + 1  # the frequencies k, largest share first
# ```
#
# Two frequencies, $k = 3$ and $2k = 6$. The rectified cosine is
# $\frac1\pi + \frac12\cos\theta + \frac{2}{3\pi}\cos 2\theta - \frac{2}{15\pi}\cos 4\theta
# + \dots$, and its variance is $\frac14 - \frac1{\pi^2}$, half the sum of the squared
# coefficients; so frequency $k$ holds $\frac{1/4}{1/2 - 2/\pi^2} \approx 0.84$ of it and $2k$
# holds $\frac{4/(9\pi^2)}{1/2 - 2/\pi^2} \approx 0.15$ (the sine does the same). A model that
# sharpens a feature adds harmonics of a frequency it already uses: a higher frequency count
# need not mean new rotations.
# ````
#
# ```{exercise}
# :label: ex-inflation-dropout
#
# These models train with dropout 0.1, the default of the PyTorch encoder layer the paper's
# reference implementation used; the paper itself does not state it. Rerun the previous chapter
# and this one without it (`python -m acebook.runner run modular_addition -p dropout 0`, then the
# same for `core_inflation`) and compare the grokking epochs, the training-loss figure and panels
# A and C. Before you run: which of them do you expect to change, and why could a regulariser that
# only adds noise to the training passes matter for the loss spikes?
# ```
#
# ````{solution} ex-inflation-dropout
# :class: dropdown
#
# Without dropout the models grok later, and under weight decay their training loss spikes again
# and again after they fit the training set: the slingshot cycles described above, so that
# some snapshots catch a model that has lost the task, and the weight-decay arm's means no longer
# describe working models. A plausible reason, which this book does not test further: once the
# training loss is tiny, the gradients and AdamW's running estimate of their squared size shrink
# together, and the next larger gradient is divided by that small estimate, a step far larger than
# the learning rate. Dropout keeps every training pass noisy, so the loss and the gradients never
# become that small. Compare the cores, too: the inflation of panel A needs working models to
# mean anything, and the `training_collapses` counts tell you how many you have.
# ````
