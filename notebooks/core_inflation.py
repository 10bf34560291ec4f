# ---
# jupyter:
#   corelib_inputs: [recorded]
#   written_numbers:
#   - the same three models for 20 000 epochs
#   - from about 15 to about 60 dimensions
#   - The paper reports about 15 and about 60, a factor of 4
#   - just outside the paper's ±10 %
#   - read as at most 10 % more
#   - rather than about 15 at the branch
#   - rather than about 60 at the end
#   - against the paper's 4
#   - 1 000 give the same cores as 64
#   - One run has dropout 0.
#   - the paper's 60
#   - instead of the paper's 64
#   - may miss 5 % of the test pairs
#   - at most 0.001 of the accuracy
#   - Both are above 0.05
#   - the 95 % interval
#   - --dropout 0
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
# ```{admonition} In this chapter
# :class: tip
#
# **You will be able to**
# - read a branching experiment: two arms from one run, and what differs between them besides
#   the setting that was changed;
# - tell the necessary from the sufficient dimension of a core, and read redundancy off the gap
#   between them;
# - read a removal curve, compute a necessary rank from it, and explain why that rank depends on
#   its threshold;
# - spot training collapses (loss spikes) that make a mean over models misleading;
# - count the frequencies a representation uses without fitting an operator, and say what that
#   count does and does not measure.
#
# **Before you start**: the chapter {doc}`modular_addition` (the models, the snapshots, the
# necessary and sufficient ranks, the shift operator and its modes); Fourier series on a cycle
# of $p$ points; AdamW and its decoupled weight decay.
#
# **Time**: about {glue:text}`time_read` minutes to read, {glue:text}`time_total` with the exercises.
#
# **Computing it** on {glue:text}`cost_machine`: {glue:text}`cost_book` with the book's
# settings, {glue:text}`cost_paper` with the paper's (`--profile paper`).
# ```
#
# The previous chapter stopped shortly after grokking, when the {term}`cores <core>` were compact.
# It defined the terms used here: the {term}`energy rank`, the {term}`necessary rank` (what must
# be removed to destroy the answer) and the {term}`sufficient rank` (what must be kept to
# compute it), and the {term}`shift operator` with its {term}`rotational modes <rotational mode>`.
# What happens if training simply continues? The paper trained the same three models for 20 000
# epochs. It reports that under {term}`weight decay` the cores keep **growing**, from about 15 to
# about 60 dimensions, while the number of dimensions the models actually *need* stays put: the
# growth is redundancy. Meanwhile the {term}`shift operator` collects
# {term}`rotational modes <rotational mode>`, up to nearly all $\lfloor p/2 \rfloor = 26$.
#
# The experiment (the paper's Figure 3) has two {term}`arms <arm>`:
#
# - **weight decay kept** continues the run of the previous chapter;
# - **weight decay removed** is a copy of the same models at epoch {glue:text}`branch_epoch`,
#   continued with weight decay {glue:text}`branch_weight_decay:g` and a fresh optimizer.
#
# The arms differ in more than the decay. The removed arm also restarts AdamW, whose first steps
# move every weight by about the learning rate. The chapter {doc}`inflation_clock` adds the
# missing control: an arm that restarts the optimizer and keeps the decay.
#
# Training that long takes hours on a CPU. So this chapter first shows a {term}`recorded run` at
# the paper's settings. Then it trains the same models over a short stretch after the
# {term}`branch`, and uses their weights to look at how the ranks are read: removal curves, loss
# spikes, and the Fourier content of the representation.

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
precision = "fp32"  # or "bf16", or "auto" (bf16 where native)
n_jacobians = 64
energy = 0.99

# %% tags=["hide-input"]
from myst_nb import glue

from acebook.readability import chapter_time
from acebook.run_times import chapter_cost

cost = chapter_cost("core_inflation")
glue("cost_machine", cost.machine, display=False)
glue("cost_book", cost.book, display=False)
glue("cost_paper", cost.paper, display=False)
minutes = chapter_time("core_inflation")
glue("time_read", minutes.reading, display=False)
glue("time_total", minutes.total, display=False)

# %%
import matplotlib.pyplot as plt
from IPython.display import display
from myst_nb import glue

from acebook.claims_page import chapter_frame
from corelib import claims, plots
from corelib.experiments import core_inflation, modular_runs, paper_scale

params = modular_runs.ModularParams.from_namespace(globals())

# %% [markdown]
# ## At the paper's horizon: a recorded run
#
# Over the paper's {glue:text}`paper_long_epochs` epochs, the recorded run shows the three
# trends the paper reports: the cores grow, most of the growth is redundancy, and the shift
# operators gather rotations. Two things differ. Our cores are smaller than the paper's at both
# ends of the growth, and the cores trained without weight decay do not stay compact.
#
# The `paper` {term}`profile` trains both arms that long. We ran it once and keep its analysed
# {term}`snapshots <snapshot>` in the repository (where and how long it ran is told under "How
# this chapter computes"). The figure below is the {glue:text}`rec_source`, with
# {glue:text}`rec_seeds` models; its settings differ from the paper's in:
# {glue:text}`rec_settings`.

# %%
recorded = paper_scale.recorded_inflation()
questions = paper_scale.recorded_questions()
paper_scale.record_claims("core_inflation", recorded, questions)

# %% tags=["hide-input"]
fig = plots.figure_recorded_inflation(recorded)
glue("fig_inflation_recorded", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_inflation_recorded
# :name: fig-inflation-recorded
#
# **Core dimension and rotational modes over {glue:text}`rec_end` epochs, weight decay kept or
# removed** (the recorded run). (A) Core dimension (necessary rank) of the models with weight
# decay kept (black) and removed at the dotted epoch (purple), mean ± sem. (B) Necessary
# (solid) and sufficient (dashed) dimensions, means over models. (C) Left: magnitudes of the
# shift operator of the first model at the last epoch in each arm, on a common colour scale; right:
# number of rotational modes over time, against the maximum $\lfloor p/2 \rfloor$.
# ```
#
# ### The cores inflate, to a smaller size than in the paper
#
# With weight decay kept, the cores keep growing long after grokking (panel A). The mean core
# dimension goes from {glue:text}`rec_wd_core_dim_start:.1f` at epoch {glue:text}`rec_start` to
# {glue:text}`rec_wd_core_dim_end:.1f` at epoch {glue:text}`rec_end`, a factor of
# {glue:text}`rec_wd_growth:.1f`.
#
# The growth is slow at first. Half of it is there only at epoch
# {glue:text}`rec_wd_growth_half_epoch`, and nine tenths at epoch
# {glue:text}`rec_wd_growth_90_epoch`. After that the mean wanders around its final size.
#
# The paper reports about 15 and about 60, a factor of 4. Our growth factor is close to the
# paper's, but both of our ends lie below its values. The start is
# {glue:text}`rec_wd_start_below_paper_pct:.0f` % lower, just outside the paper's ±10 %
# {claim}`inflation.core_dim_grok <differs>`. The end is
# {glue:text}`rec_wd_end_below_paper_pct:.0f` % lower {claim}`inflation.core_dim_end <differs>`.
#
# With weight decay removed, the cores end at {glue:text}`rec_no_core_dim_end:.1f` dimensions,
# smaller than with weight decay {claim}`inflation.arm_dim_gap <reproduced>`. But they do not
# stay compact. They grow by a factor of {glue:text}`rec_no_growth:.1f`, and early: nine tenths
# of the growth is there {glue:text}`rec_no_growth_90_after` epochs after the branch, where the
# optimizer restarted.
#
# ### Mostly redundancy, not only redundancy
#
# Panel B compares two ranks. The {term}`sufficient dimension <sufficient rank>` is what a model
# needs to keep its accuracy. The {term}`necessary dimension <necessary rank>` is what must be
# removed before its accuracy falls to chance. The paper finds the first stable while the second
# grows: the new directions are redundant.
#
# Most of our growth is indeed redundancy. With weight decay, the gap between the two ranks
# grows from {glue:text}`rec_wd_gap_start:.1f` to {glue:text}`rec_wd_gap_end:.1f` dimensions.
# The model can compute without them, as the sufficient rank shows. Yet each holds a copy of the
# answer, so all of them must be removed before accuracy falls to chance.
#
# Yet the models also come to need more directions. With weight decay, the sufficient dimension
# goes from {glue:text}`rec_wd_sufficient_rank_start:.1f` to
# {glue:text}`rec_wd_sufficient_rank_end:.1f` instead of staying stable
# {claim}`inflation.sufficient_stable <differs>`. Without weight decay it stays near its start:
# {glue:text}`rec_no_sufficient_rank_end:.1f` at the end.
#
# ### More rotations
#
# With weight decay, the shift operators gain rotational modes (panel C). The mean count goes
# from {glue:text}`rec_wd_modes_start:.1f` to {glue:text}`rec_wd_modes_end:.1f` of the
# {glue:text}`rec_modes_max` possible: close to the maximum
# {claim}`inflation.modes_end <reproduced>`, and far more than without weight decay
# {claim}`inflation.arm_mode_gap <reproduced>`.
#
# Without weight decay the count does not stay as sparse as the paper says. It goes from
# {glue:text}`rec_no_modes_start:.1f` at the branch to {glue:text}`rec_no_modes_end:.1f`, more
# than the paper's "stay sparse" allows, read as at most 10 % more
# {claim}`inflation.modes_sparse <differs>`. The right of panel C shows it wandering up and
# down over the run rather than drifting.
#
# Both arms keep doing the task: mean test accuracies at the end are
# {glue:text}`rec_wd_test_acc_end:.3f` with weight decay and {glue:text}`rec_no_test_acc_end:.3f`
# without.
#
# Why would weight decay add rotations? The paper's answer, derived in {doc}`grokking_theory`, is
# a norm argument. With many equivalent Fourier modes available, weight decay lowers the weight
# norm by spreading the same {term}`margin` over as many of them as it can; without weight decay
# nothing rewards the spreading. That chapter checks the argument in a small model. Whether the
# trained networks here spread their weights for this reason is an open question: this book has
# not tested it.
#
# ## Our explanations, tested
#
# Why do our numbers differ from the paper's? Four explanations can be tested on models trained
# here, and most fail (the optimizer restart, a fifth, is tested in another chapter; see the
# Summary):
#
# - **Dropout** does not make our cores small. Trained without it, they end smaller still.
# - **The number of Jacobians** does not matter: 1 000 give the same cores as 64.
# - **A looser sufficiency test** does not make the sufficient dimension stable.
# - **Seed noise** could explain the differences in core size: three seeds vary too much to tell.
#
# For the first three, the weight-decay arm was trained twice more on one machine for the
# paper's {glue:text}`paper_long_epochs` epochs. One run has dropout 0. The other, the control, has
# the recorded run's dropout {glue:text}`rec_dropout:g`, so the two differ in dropout only. Both
# are stored in `recorded/core_inflation_questions_paper`; "the recorded run" below still means
# the original one.

# %%
view = paper_scale.question_view(questions, recorded, params)

# %% tags=["hide-input"]
for name, value in view.values.items():
    glue(name, value, display=False)
fig = plots.figure_inflation_questions(
    view.curves, view.tolerance_ranks, view.tolerance_levels,
    view.tolerance_epochs, paper=view.paper)
glue("fig_inflation_questions", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_inflation_questions
# :name: fig-inflation-questions
#
# **The weight-decay arm trained again.** (A) Core dimension, mean and range over the three
# models: without dropout (orange), with dropout {glue:text}`rec_dropout:g` (black), and the
# recorded run (grey, dashed); crosses: the paper's values. (B) Sufficient rank of the control
# at three tolerances, bars the means and dots the models.
# ```
#
# ### Dropout: the cores end smaller without it
#
# Without dropout the cores end smaller, not larger: {glue:text}`q_d0_end:.1f` dimensions on
# average, against {glue:text}`q_ctl_end:.1f` for the control trained again with dropout. The
# recorded run ends with {glue:text}`rec_wd_core_dim_end:.1f`. Removing dropout moves the cores
# away from the paper's 60, not toward it {claim}`inflation.dropout_end_core <does not hold>`.
# So dropout is not why our cores are smaller.
#
# Dropout changes something else: when the models generalise. Without it, only
# {glue:text}`q_d0_grokked_branch` of {glue:text}`q_n_models` models has generalised by the
# branch epoch {glue:text}`branch_epoch`. The others are still memorising there, so branching at
# that epoch only makes sense with dropout. (The table's core dimension of a memorising model is
# the core of its memorised answers.) By epoch {glue:text}`paper_long_epochs` every model
# generalises in both runs.

# %%
display(view.table)

# %% [markdown]
# Without dropout the models also collapse far more often: {glue:text}`q_d0_collapses:.0f` times
# per model after the branch, against {glue:text}`q_ctl_collapses:.0f` with dropout
# {claim}`inflation.dropout_spikes <holds>`. The section "Loss spikes" below returns to this.
#
# ### The number of Jacobians: no effect
#
# Using {glue:text}`q_n_jacobians` Jacobians, as the reference code does, instead of the paper's
# 64 changes no model's core: every model of both runs has the same core dimension at the end
# {claim}`inflation.jacobians_count <holds>`.
# The reason is the one the chapter {doc}`modular_addition` found: after the last block the
# logits are a linear map of the activations, so every Jacobian is the same matrix
# {claim}`modular.jacobians_exact <holds>`.
#
# ### A looser sufficiency test: the growth stays
#
# Even when the core may miss 5 % of the test pairs, the sufficient rank still grows. The paper's
# test lets the core lose at most 0.001 of the accuracy; with {glue:text}`rec_n_test` test pairs
# that allows one pair. Perhaps the growth counts only the last few hard pairs? The table gives
# the control's mean sufficient rank at three tolerances.

# %%
display(view.tolerances)

# %% [markdown]
# At the strict tolerance the sufficient rank grows by a factor of
# {glue:text}`q_strict_growth:.2f` from the branch to the end. When the core may miss
# {glue:text}`q_loose_tolerance:g` of the pairs, it still grows by
# {glue:text}`q_loose_growth:.2f`: from {glue:text}`q_suff_loose_first:.1f` to
# {glue:text}`q_suff_loose_last:.1f` dimensions
# {claim}`inflation.sufficient_loose_stable <does not hold>`. So the growth is not an artefact
# of a strict test: late in training, the models need more directions to do the task at all.
#
# ### Seed noise: it could be
#
# Three seeds vary too much to rule noise out. The paper's values and ours each come from three
# models. Treating the paper's value as exact, a one-sample t-test asks: if our mean were really
# the paper's, how often would noise of the size our seeds show put it this far away? At the
# branch the p-value is {glue:text}`q_p_branch:.2f`
# {claim}`inflation.grok_core_seed_noise <holds>`, and at the end {glue:text}`q_p_end:.2f`
# {claim}`inflation.end_core_seed_noise <holds>`. Here "holds" means that noise is not ruled
# out.
#
# Both are above 0.05, so seed noise could explain both differences. At the end the 95 %
# interval of our mean runs from {glue:text}`q_end_low:.0f` to {glue:text}`q_end_high:.0f`
# dimensions, and it contains the paper's 60. With three seeds a test has little power:
# "could be noise" is not "is noise". More seeds would tell.
#
# ## This build: the same models over a short stretch
#
# This build trains the same models again, but only {glue:text}`span` epochs past the branch.
# That is too short to show the trend: in the recorded run, the cores have covered half of
# their growth only at epoch {glue:text}`rec_wd_growth_half_epoch`. The build does two things
# the record cannot. It checks the record, and it keeps the trained weights, so the sections
# after this one can look at how the ranks are read.
#
# `modular_runs.train_arms(params, long_epochs)` extends the weight-decay run of the previous
# chapter to epoch {glue:text}`end`, and branches the second arm from its snapshot at epoch
# {glue:text}`branch_epoch`; both train as one stack. `analyse_arm` then analyses every snapshot
# of each arm; it never trains.

# %%
modular_runs.train_arms(params, long_epochs)
arms = {arm: modular_runs.analyse_arm(params, arm, long_epochs)
        for arm in modular_runs.ARMS}
summary = core_inflation.inflation_summary(params, arms["wd"],
                                           arms["no_wd"])
agreement = paper_scale.inflation_agreement(params, arms, recorded)

# %% tags=["hide-input"]
fig = plots.figure_inflation(arms, p=p, branch_epoch=branch_epoch)
glue("fig_inflation", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_inflation
# :name: fig-inflation
#
# **This build's two arms after the branch**, drawn as {numref}`fig-inflation-recorded`: (A)
# core dimension, (B) necessary and sufficient dimensions, (C) shift operators at the last
# epoch and rotational modes over time.
# ```
#
# The table gives the means over the models at the branch, where both arms are the same models,
# and at epoch {glue:text}`end`.
#
# | | at the branch | weight decay kept, epoch {glue:text}`end` | weight decay removed, epoch {glue:text}`end` |
# | --- | --- | --- | --- |
# | core dimension | {glue:text}`wd_core_dim_start:.1f` | {glue:text}`wd_core_dim_end:.1f` | {glue:text}`no_core_dim_end:.1f` |
# | necessary rank, per model | | {glue:text}`wd_necessary_end_list` | {glue:text}`no_necessary_end_list` |
# | sufficient dimension | {glue:text}`wd_sufficient_rank_start:.1f` | {glue:text}`wd_sufficient_rank_end:.1f` | {glue:text}`no_sufficient_rank_end:.1f` |
# | necessary − sufficient | {glue:text}`wd_gap_start:.1f` | {glue:text}`wd_gap_end:.1f` | {glue:text}`no_gap_end:.1f` |
# | rotational modes | {glue:text}`wd_modes_start:.1f` | {glue:text}`wd_modes_end:.1f` | {glue:text}`no_modes_end:.1f` |
# | test accuracy | {glue:text}`wd_test_acc_start:.3f` | {glue:text}`wd_test_acc_end:.3f` | {glue:text}`no_test_acc_end:.3f` |
#
# The two arms' ranges of core dimension at the end {glue:text}`dim_ranges`. With three models
# in each arm, that is all one can say.
#
# ```{admonition} Details: this build against the record
# :class: dropdown
#
# The build trained the same models as the recorded run (same seeds and settings:
# {glue:text}`rec_same_models`). At the {glue:text}`rec_n_compared` snapshots both have,
# {glue:text}`rec_n_differences` analysed values differ from the record. Of these,
# {glue:text}`rec_n_rank_differences` are ranks, core dimensions or mode lists; the first is
# {glue:text}`rec_first_difference`.
#
# The claims compare over the models rather than value by value. Of the
# {glue:text}`rec_n_quantities` quantities measured per model at those snapshots (a rank, an
# accuracy, a mode count at one epoch), {glue:text}`rec_n_moved` moved in at least one model.
# Of these, {glue:text}`rec_n_beyond` moved in their mean over the models by more than the larger of
# {glue:text}`seed_errors` standard errors of the difference and, for a whole number, one unit.
# The largest move of a mean is {glue:text}`rec_largest_z` standard errors.
#
# The previous chapter says why a build on another machine or thread count drifts away from the
# record, value by value; the longer the run, the further.
# ```
#
# ## Loss spikes
#
# Means over three models can hide an uneven run. Adaptive optimizers such as AdamW can throw a
# model off a training set it fits perfectly, once its training loss is tiny. Within a few steps
# the loss jumps to about chance level, and the model then learns the set again: the *slingshot
# mechanism* {cite:p}`thilak2022slingshot`. A snapshot inside such a spike analyses a model
# that, for the moment, does not do the task.
#
# `modular_runs.training_collapses` lists the episodes in which a model's training accuracy fell
# below {glue:text}`collapse_threshold` after it had first reached it;
# `modular_runs.collapse_summary` counts them.

# %%
collapse_threshold = 0.9
histories = {arm: modular_runs.history(params, arm, until=summary.end)
             for arm in modular_runs.ARMS}

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
# The table counts the collapses between the branch and epoch {glue:text}`end`. A model that
# has not yet refitted its training set after the fresh optimizer's first steps is learning,
# not collapsing, and is not counted. A model does the task when its test accuracy is at least
# {glue:text}`grok_threshold`.
#
# | | weight decay kept | weight decay removed |
# | --- | --- | --- |
# | collapses per model | {glue:text}`wd_collapses:.1f` | {glue:text}`no_collapses:.1f` |
# | share of epochs in a collapse (%) | {glue:text}`wd_collapse_pct:.0f` | {glue:text}`no_collapse_pct:.0f` |
# | longest collapse (epochs) | {glue:text}`wd_collapse_longest` | {glue:text}`no_collapse_longest` |
# | models doing the task at epoch {glue:text}`end` (of {glue:text}`n_models`) | {glue:text}`wd_n_working_end` | {glue:text}`no_n_working_end` |
# | core dimension of those models | {glue:text}`wd_core_dim_end_working:.1f` | {glue:text}`no_core_dim_end_working:.1f` |
#
# The recorded run counts its collapses the same way. Over its {glue:text}`rec_end` epochs, a
# model collapsed {glue:text}`rec_wd_collapses:.1f` times after the branch with weight decay and
# {glue:text}`rec_no_collapses:.1f` times without. So its means over all models, which the paper
# reports and the claims use, describe models that do the task.
#
# Dropout matters here. These models train with dropout {glue:text}`dropout:g`, the rate the
# reference implementation used (PyTorch's default); the paper does not state one. Trained
# without it at the paper's settings, the models collapse {glue:text}`q_d0_collapses:.0f` times
# each after the branch, against {glue:text}`q_ctl_collapses:.0f` for the same models with
# dropout {claim}`inflation.dropout_spikes <holds>` (the section "Our explanations, tested").
#
# Why models spike is still open. One candidate: once the training loss is tiny, the gradients
# and AdamW's running estimate of their squared size shrink together. The next larger gradient,
# divided by that small estimate, then gives a step far larger than the learning rate. Dropout
# keeps every training pass noisy, so the loss and the gradients would never become that small.
# The dropout runs fit this candidate but do not prove it: testing it needs the optimizer's state
# around each spike, which the runs do not keep.
#
# ## What the necessary rank counts
#
# The core dimension is a threshold on a curve, and the curve is worth seeing. It is the
# necessary rank: the smallest rank $r$, at least the energy rank, whose removal drops test
# accuracy to $2/p$. The function `modular_runs.removal_curves(params, arm, epoch)` removes the
# leading $r$ directions of each model's full-rank core, for every $r$, and records the accuracy
# that is left.

# %%
middle_level, loose_level = 0.05, 0.1
curves = {arm: modular_runs.removal_curves(params, arm, summary.end)
          for arm in modular_runs.ARMS}
claims.record(  # for the claims page
    "core_inflation", core_inflation.inflation_claim_values(summary),
    settings=claims.deviations(params, modular_runs.ModularParams(),
                               ignore=["eval_every"]))

# %% tags=["hide-input"]
necessary = {arm: core_inflation.necessary_ranks(arms[arm],
                                                 summary.end)
             for arm in modular_runs.ARMS}
fig = plots.figure_removal(curves, necessary, chance=params.chance_level,
                           loose_level=loose_level, epoch=summary.end)
glue("fig_removal", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_removal
# :name: fig-inflation-removal
#
# **How accuracy falls as the core is removed**, at the last epoch, for each model with weight
# decay kept (A) and removed (B). Dashed: the threshold $2/p$ of the necessary rank; dotted: the
# looser level {glue:text}`loose_level`; dots: the necessary rank the analysis found (log
# scale).
# ```
#
# A curve can drop fast and then linger a few points above $2/p =$
# {glue:text}`chance_level:.3f`. Such a model keeps a thin residue of the answer, spread over
# many weak directions. That residue, not the bulk of the core, then sets its necessary rank.
#
# With weight decay kept, the necessary ranks at epoch {glue:text}`end` are
# {glue:text}`wd_necessary_end_list`. Removal first leaves at most {glue:text}`loose_level` at
# ranks {glue:text}`wd_loose_end_list`.
#
# With weight decay removed, the necessary ranks are {glue:text}`no_necessary_end_list`, and
# the looser level is reached at ranks {glue:text}`no_loose_end_list`.
#
# The table gives each arm's mean core dimension at three thresholds: $2/p$, the paper's, which
# the figures and claims use; {glue:text}`middle_level`; and the looser
# {glue:text}`loose_level`. Compare the looser rows with the core dimension at the branch,
# {glue:text}`wd_core_dim_start:.1f`. Where they are close, what grew after the branch is such a
# residue, not the bulk of the cores.

# %%
levels = [params.chance_level, middle_level, loose_level]
display(core_inflation.threshold_table(curves, levels).round(1))

# %% [markdown]
# ## How many frequencies?
#
# The mode count of panel C depends on two choices: the core the operator lives in, and a linear
# fit that must explain the whole cycle. A second count needs neither.
#
# Take the class centroids of the block's *whole* output: the mean activation over the test
# examples with answer $c$. Fourier-transform them along the cycle $c = 0, \dots, p - 1$. A
# representation that computes with the frequencies $k$ puts its variance across answers at
# those $k$ (`operators.cycle_spectrum`).
#
# `operators.frequency_count` is the fewest frequencies that hold a share
# {glue:text}`frequency_share` of that variance; `modular_runs.centroid_spectra` computes it for
# every snapshot of an arm. Each frequency takes two dimensions, a cosine and a sine. So twice
# the count is a rough size for a core that keeps that much of the representation.

# %%
frequency_share = 0.9
spectra = {arm: modular_runs.centroid_spectra(params, arm,
                                              summary.end,
                                              share=frequency_share)
           for arm in modular_runs.ARMS}

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
# on average; as the models grok, that falls to a handful.
#
# At the branch the models use {glue:text}`wd_frequencies_start:.1f` frequencies on average. At
# epoch {glue:text}`end`, those trained with weight decay use {glue:text}`wd_frequencies_end:.1f`
# and those trained without it {glue:text}`no_frequencies_end:.1f`.
#
# This count and the mode count of panel C need not agree: they measure different things,
# frequencies of the whole representation here and rotations of a linear operator inside the
# core there. Two published views even pull in opposite directions. In the grokking literature,
# weight decay prunes a representation down to a few Fourier features
# {cite:p}`nanda2023progress`, so without it nothing removes the features a model already has.
# In the paper, weight decay instead spreads the margin over more rotational modes.
#
# ## The paper's claims
#
# This chapter's rows of the [claims page](claims.ipynb). The paper's numbers are those of epoch
# {glue:text}`paper_long_epochs`, and the claims are judged on the recorded run. The column "this
# build" gives what this build measured after {glue:text}`span` epochs, "measured at reduced
# settings". It shows where the trend stands that early, and cannot reproduce or refute the
# paper's end point.

# %% tags=["hide-input"]
chapter = {"summary": summary, "arms": arms, "histories": histories,
           "curves": curves, "spectra": spectra,
           "collapse_threshold": collapse_threshold,
           "middle_level": middle_level, "loose_level": loose_level,
           "frequency_share": frequency_share,
           "recorded": recorded, "agreement": agreement}
values = core_inflation.inflation_glue_values(params, chapter)
for name, value in values.items():
    glue(name, value, display=False)

# %%
display(chapter_frame("core_inflation"))

# %% [markdown]
# ## Summary
#
# What reproduces, on the recorded run at the paper's settings, is the direction and most of the
# shape of Figure 3:
#
# - under weight decay the cores inflate, from {glue:text}`rec_wd_core_dim_start:.0f` to
#   {glue:text}`rec_wd_core_dim_end:.0f` dimensions over {glue:text}`rec_end` epochs, and end
#   larger than the cores trained without it {claim}`inflation.arm_dim_gap <reproduced>`;
# - the shift operators gather rotational modes up to nearly the maximum of
#   {glue:text}`rec_modes_max` {claim}`inflation.modes_end <reproduced>`, far more than without
#   weight decay {claim}`inflation.arm_mode_gap <reproduced>`;
# - most of the growth is redundancy: the gap between the necessary and the sufficient dimension
#   grows from {glue:text}`rec_wd_gap_start:.1f` to {glue:text}`rec_wd_gap_end:.1f`.
#
# What differs, in size:
#
# - both ends of the growth are smaller than the paper's. The cores have
#   {glue:text}`rec_wd_core_dim_start:.0f` dimensions rather than about 15 at the branch
#   {claim}`inflation.core_dim_grok <differs>`, and {glue:text}`rec_wd_core_dim_end:.0f` rather
#   than about 60 at the end {claim}`inflation.core_dim_end <differs>`. The growth factor,
#   {glue:text}`rec_wd_growth:.1f` against the paper's 4, agrees;
# - the sufficient dimension grows from {glue:text}`rec_wd_sufficient_rank_start:.1f` to
#   {glue:text}`rec_wd_sufficient_rank_end:.1f`, where the paper has it stable
#   {claim}`inflation.sufficient_stable <differs>`;
# - without weight decay the cores do not stay compact. They grow from
#   {glue:text}`rec_no_core_dim_start:.0f` to about {glue:text}`rec_no_core_dim_end:.0f`
#   dimensions, and the mode count goes from {glue:text}`rec_no_modes_start:.0f` to
#   {glue:text}`rec_no_modes_end:.0f` {claim}`inflation.modes_sparse <differs>`.
#
# What the chapter's own tests found (the section "Our explanations, tested"):
#
# - **Not dropout.** Without dropout the cores end smaller, not larger
#   {claim}`inflation.dropout_end_core <does not hold>`, and the models collapse far more often
#   {claim}`inflation.dropout_spikes <holds>`.
# - **Not the number of Jacobians.** 1 000 give the same cores as 64
#   {claim}`inflation.jacobians_count <holds>`.
# - **Not a strict test.** With a looser sufficiency test the sufficient dimension still grows
#   {claim}`inflation.sufficient_loose_stable <does not hold>`.
# - **Perhaps seed noise.** Both differences in core size are within what three seeds vary
#   {claim}`inflation.grok_core_seed_noise <holds>` {claim}`inflation.end_core_seed_noise <holds>`.
# - **The optimizer restart.** The removed arm also restarts AdamW. The window on the paper's
#   clock ran the missing control, which restarts AdamW and keeps the decay. It branches at
#   grokking, not at this chapter's branch epoch. At the window's end its cores are not told
#   apart from the uninterrupted run's {claim}`window_paper.restart_smaller <does not hold>`, and
#   the removed arm's cores are not told apart from the control's
#   {claim}`window_paper.removed_below_restart <does not hold>`. With three seeds a side, the
#   restart is neither shown to explain the growth nor ruled out. The chapter
#   {doc}`interpretability_window` shows the curves; the exercise "Restart the optimizer, keep
#   the decay" reruns the control on this chapter's clock.
#
# What is open: whether more seeds would separate our core sizes from the paper's (each run has
# three models; the paper's values are read off its figure), and why models spike.
#
# This build's short stretch after the branch trains the same models as the record. Its removal
# curves show how to read the necessary rank with care: a thin residue of the answer, just above
# $2/p$, can set it.
#
# ## How this chapter computes
#
# Both arms are trained on the book's engine, all seeds at once. The weight-decay arm resumes the
# previous chapter's run from its last checkpoint, so nothing already trained is redone. The
# removed arm starts from that run's snapshot at the branch epoch, with a fresh AdamW state.
# Each snapshot's analysis is stored in a folder keyed by the parameters; removal curves are
# cached beside it.
#
# The recorded run took {glue:text}`rec_hours:.1f` hours on {glue:text}`rec_threads` threads of
# an {glue:text}`rec_cpu`. Its folder, `recorded/core_inflation_paper` (read by
# `corelib.experiments.paper_scale.recorded_inflation`), keeps the analysed snapshots and the
# training histories, with the provenance of the run. The command
# `python -m acebook.record verify core_inflation --epochs 1000` re-derives the record's first
# epochs from scratch, as many as `--epochs` asks for, and compares.
#
# The tests of the chapter's explanations are `recorded/core_inflation_questions_paper` (read by
# `paper_scale.recorded_questions`; computed by `corelib.experiments.core_inflation_questions`).
# Its two arms were trained with `python -m acebook.paper_runs advance core_inflation --arm wd
# --dropout 0` and `... --arm wd`, and recorded with `python -m acebook.record export
# core_inflation_questions`. On every build with the book's settings, the chapter trains the
# dropout-0 arm from scratch to its first snapshot and compares it with the record:
# {glue:text}`q_sample_agree` of the {glue:text}`q_sample_n` quantities it measures per model
# agree at the level of the claims.
#
# On every build, `paper_scale.inflation_agreement` compares this build's snapshots with the
# record's where both have them; the Details under this build's table give the counts. On
# another machine or version of the code, float rounding can move an accuracy across a
# threshold, and the comparison then names the values that differ. The claims page judges the
# chapter's claims on the record and shows this build's values beside them.

# %% [markdown]
# ## Exercises
#
# Difficulty 🔴 (of 🔴🔴🔴🔴🔴) and importance 🔵 (of 🔵🔵🔵🔵🔵) follow the conventions of the
# ARENA course. A coding exercise gives a stub; fill it in and run the check below it, which
# calls your function on book-like cases, random cases and edge cases and says what is wrong.
#
# ```{exercise} Redundant copies
# :label: ex-inflation-redundancy
#
# 🔴🔴⚪⚪⚪ · 🔵🔵🔵🔵⚪ · about 10 minutes, pen and paper
#
# A model stores the same one-dimensional signal $s$ in $m$ orthogonal directions with equal
# weights, $\mathbf h = \frac{s}{\sqrt m} \sum_{i=1}^m \mathbf e_i$, and reads it out with
# $\mathbf w = \frac{1}{\sqrt m}\sum_i \mathbf e_i$. How many directions are *sufficient* to keep
# the sign of the read-out, and how many *necessary*, i.e. must be removed to destroy it?
#
# **Expected result**: one is sufficient, all $m$ are necessary.
# ```
#
# ````{solution} ex-inflation-redundancy
# :class: dropdown
#
# ```{include} ../solutions/core_inflation.md
# :start-after: <!-- ex-inflation-redundancy -->
# :end-before: <!-- end ex-inflation-redundancy -->
# ```
# ````
#
# ```{exercise} The necessary rank from a removal curve
# :label: ex-inflation-necessary
#
# 🔴🔴⚪⚪⚪ · 🔵🔵🔵🔵⚪ · about 15 minutes
#
# Write `necessary_rank(remove, energy_rank, level)`: `remove[r - 1]` is the accuracy left after
# removing the leading $r$ directions of a core; return the smallest rank $r \ge$
# `energy_rank` whose removal leaves at most `level`, or `None`. Then apply it to `curves` (each
# arm's `"remove"` has one row per model, `"energy_rank"` one entry per model) and recompute the
# table of the section "What the necessary rank counts".
#
# **Expected result**: the check prints "all 8 cases pass"; your means match the table.
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# Once most of the answer is gone, accuracy hovers around chance and can cross the level more
# than once. The necessary rank is the *first* crossing at or above the energy rank, whatever the
# curve does after it.
# ```

# %%
from corelib.exercises import core_inflation as ex


def necessary_rank(remove, energy_rank, level):
    """Smallest rank r >= energy_rank with remove[r - 1] <= level."""
    raise NotImplementedError  # your code here


ex.check_necessary_rank(necessary_rank);

# %% [markdown]
# ````{solution} ex-inflation-necessary
# :class: dropdown
#
# ```{include} ../solutions/core_inflation.md
# :start-after: <!-- ex-inflation-necessary -->
# :end-before: <!-- end ex-inflation-necessary -->
# ```
# ````
#
# ```{exercise} The sufficient rank from a keep curve
# :label: ex-inflation-sufficient
#
# 🔴🔴⚪⚪⚪ · 🔵🔵🔵🔵⚪ · about 15 minutes
#
# The sufficient rank is the other end of the redundancy gap. Write
# `sufficient_rank(keep, baseline, tolerance)`: `keep[r - 1]` is the model's accuracy when only
# the leading $r$ directions of its core are kept. Return the smallest rank $r$ whose accuracy
# is at least `baseline - tolerance`, or `None`. Then apply it to `curves` with
# `tolerance=0.001`: each arm's `"keep"` has one row per model, and the baseline of model `i` is
# its test accuracy, `arms[arm][-1]["models"][i]["test_acc"]`.
#
# **Expected result**: the check prints "all 10 cases pass"; your ranks equal the analysis'
# own, `arms[arm][-1]["models"][i]["sufficient_rank"]`, model by model.
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# Unlike the necessary rank, this scan starts at rank 1. "Within the tolerance" is one-sided: a
# core that keeps *more* than the model's accuracy keeps it too. And as with the removal curve,
# the first rank that qualifies is the answer, whatever the curve does after it.
# ```

# %%
def sufficient_rank(keep, baseline, tolerance):
    """Smallest rank r with keep[r - 1] >= baseline - tolerance."""
    raise NotImplementedError  # your code here


ex.check_sufficient_rank(sufficient_rank);

# %% [markdown]
# ````{solution} ex-inflation-sufficient
# :class: dropdown
#
# ```{include} ../solutions/core_inflation.md
# :start-after: <!-- ex-inflation-sufficient -->
# :end-before: <!-- end ex-inflation-sufficient -->
# ```
# ````
#
# ```{exercise} Redundancy, found by the rank search
# :label: ex-inflation-ranks
#
# 🔴🔴🔴⚪⚪ · 🔵🔵🔵⚪⚪ · about 20 minutes
#
# Check your answer to the first exercise with the rank search the chapter uses. Build
# activations $\mathbf h = \frac{s}{\sqrt m}\sum_{i \le m} \mathbf e_i + \text{noise in the
# other directions}$ for random signs $s$, a core whose leading $m$ directions are
# $\mathbf e_1, \dots, \mathbf e_m$, and an "accuracy" that scores the sign of the read-out
# $\mathbf w^\top \mathbf h$. Pass it to `corelib.interventions.refine_rank` and find the
# necessary and sufficient ranks for $m = 1, \dots, 5$.
#
# **Expected result**: (necessary, sufficient) $= (m, 1)$ for every $m$.
# ```
#
# ````{solution} ex-inflation-ranks
# :class: dropdown
#
# ```{include} ../solutions/core_inflation.md
# :start-after: <!-- ex-inflation-ranks -->
# :end-before: <!-- end ex-inflation-ranks -->
# ```
# ````
#
# ```{exercise} Where does the redundancy grow?
# :label: ex-inflation-gap
#
# 🔴🔴⚪⚪⚪ · 🔵🔵🔵⚪⚪ · about 15 minutes
#
# Using the recorded run (`recorded["arms"]`, records as `arms` has them), plot the necessary
# minus the sufficient dimension, averaged over models, against the epoch for each arm. When does
# the gap start to grow with weight decay, and does it grow without?
#
# **Expected result**: with weight decay the gap goes from {glue:text}`rec_wd_gap_start:.1f` to
# {glue:text}`rec_wd_gap_end:.1f`, most of it between about epochs 3500 and 10 000; without
# weight decay it ends at {glue:text}`rec_no_gap_end:.1f`, most of that soon after the branch.
# ```
#
# ````{solution} ex-inflation-gap
# :class: dropdown
#
# ```{include} ../solutions/core_inflation.md
# :start-after: <!-- ex-inflation-gap -->
# :end-before: <!-- end ex-inflation-gap -->
# ```
# ````
#
# ```{exercise} Can two arms be told apart?
# :label: ex-inflation-ranges
#
# 🔴⚪⚪⚪⚪ · 🔵🔵🔵⚪⚪ · about 10 minutes
#
# With three models per arm, the chapter only says whether the two arms' ranges overlap. Write
# `range_gap(a, b)`: how far apart the ranges of two sets of per-model values are, i.e. the
# distance between their nearest ends, and `0` when the ranges share a value. Apply it to the
# necessary ranks at the last epoch of the recorded run (`recorded["arms"][arm][-1]["models"]`,
# key `"necessary_rank"`) and of this build (`core_inflation.necessary_ranks(arms[arm], end)`).
#
# **Expected result**: the check prints "all 11 cases pass". On the recorded run the two arms
# end 2 dimensions apart, although their means differ by about 15. In this build the gap is
# positive exactly when the chapter says that the ranges "do not overlap".
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# Either set may lie higher. Of `min(a) - max(b)` and `min(b) - max(a)`, at most one is
# positive, and that one is the gap.
# ```

# %%
def range_gap(a, b):
    """Distance between the ranges of a and b; 0 if they overlap."""
    raise NotImplementedError  # your code here


ex.check_range_gap(range_gap);

# %% [markdown]
# ````{solution} ex-inflation-ranges
# :class: dropdown
#
# ```{include} ../solutions/core_inflation.md
# :start-after: <!-- ex-inflation-ranges -->
# :end-before: <!-- end ex-inflation-ranges -->
# ```
# ````
#
# ```{exercise} Harmonics are not rotations
# :label: ex-inflation-harmonics
#
# 🔴🔴🔴⚪⚪ · 🔵🔵⚪⚪⚪ · about 20 minutes
#
# The frequency count of the section "How many frequencies?" counts more than rotations. Take
# one rotation, $k = 3$ on $p = 53$ answers, but rectify it: the centroid of answer $c$ is
# $\big(\max(0, \cos\theta_c), \max(0, \sin\theta_c)\big)$ with $\theta_c = 2\pi k c / p$.
# How many frequencies hold 90 % of its variance, and which? Compute it with
# `operators.cycle_spectrum` and `operators.frequency_count`, then check the shares against the
# Fourier series of a rectified cosine.
#
# **Expected result**: two frequencies, $k = 3$ and $2k = 6$, holding about 84 % and 15 %.
# ```
#
# ````{solution} ex-inflation-harmonics
# :class: dropdown
#
# ```{include} ../solutions/core_inflation.md
# :start-after: <!-- ex-inflation-harmonics -->
# :end-before: <!-- end ex-inflation-harmonics -->
# ```
# ````
#
# ```{exercise} Restart the optimizer, keep the decay
# :label: ex-inflation-restart
#
# 🔴⚪⚪⚪⚪ · 🔵🔵🔵🔵⚪ · about 15 minutes, most of it waiting
#
# The removed arm differs from the kept one in two ways: no weight decay, and a fresh AdamW
# state. Rerun the chapter with
# `ace-book run core_inflation -p branch_weight_decay 1.0 -p long_epochs 1100`: the second arm
# (purple, still labelled "removed") then restarts the optimizer at the branch and keeps the
# decay, for 200 epochs. Before you run, predict its core dimensions at epoch 1100 against the
# arm that never restarted. Measured on one core of an Intel Xeon shared with other work: 6
# minutes 10 seconds from start to end, of which 2 minutes 36 seconds on the CPU (about what a
# free core needs). It trains only the new arm; the rest comes from the chapter's first run.
#
# **Expected result** (one run): two of the three restarted models grow cores of about 65 and
# 80 dimensions with all 26 rotational modes, the third stays at 12; the arm that never
# restarted stays between 12 and 20.
# ```
#
# ````{solution} ex-inflation-restart
# :class: dropdown
#
# ```{include} ../solutions/core_inflation.md
# :start-after: <!-- ex-inflation-restart -->
# :end-before: <!-- end ex-inflation-restart -->
# ```
# ````
#
# ```{exercise} Could it be seed noise?
# :label: ex-inflation-seed-noise
#
# 🔴🔴⚪⚪⚪ · 🔵🔵🔵🔵⚪ · about 15 minutes
#
# Write `p_value(values, paper)`: the two-sided p-value of a one-sample t-test of the per-seed
# `values` against the paper's value. Then apply it to the recorded run's core dimensions at the
# branch (against 15) and at the end (against 60): `recorded["arms"]["wd"]` holds the snapshot
# records, each with `"models"` and their `"core_dim"`.
#
# **Expected result**: the check prints "all 8 cases pass"; your p-values are the chapter's,
# {glue:text}`q_p_branch:.2f` and {glue:text}`q_p_end:.2f`.
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# The statistic is $t = (\bar x - \mu)/(s/\sqrt n)$ with the sample standard deviation $s$
# (`ddof=1`); under seed noise alone it follows Student's t with $n - 1$ degrees of freedom
# (`scipy.stats.t.sf`). Double the tail: the paper's value may lie on either side.
# ```

# %%
def p_value(values, paper):
    """Two-sided one-sample t-test p-value: values vs paper."""
    raise NotImplementedError  # your code here


ex.check_seed_noise_p(p_value);

# %% [markdown]
# ````{solution} ex-inflation-seed-noise
# :class: dropdown
#
# ```{include} ../solutions/core_inflation.md
# :start-after: <!-- ex-inflation-seed-noise -->
# :end-before: <!-- end ex-inflation-seed-noise -->
# ```
# ````
#
# ```{exercise} Train without dropout
# :label: ex-inflation-dropout
#
# 🔴⚪⚪⚪⚪ · 🔵🔵🔵⚪⚪ · about 15 minutes, most of it waiting
#
# Rerun the chapter with `ace-book run core_inflation -p dropout 0`. It trains both arms again
# without dropout to this build's horizon. Before you run,
# predict: do the three models generalise by the branch epoch, as they do with dropout? Then
# compare the cores at the horizon with this build's, and with the record's dropout-0 arm
# (`questions.arms["dropout0"]`, loaded at the top of the chapter; its first epochs are the
# same training).
#
# **Expected result** (on the machine of the record): at the branch the three models' test
# accuracies are {glue:text}`q_d0_branch_acc`, so {glue:text}`q_d0_grokked_branch` of them
# generalises; at epoch {glue:text}`q_exercise_epoch` their cores have
# {glue:text}`q_d0_core_exercise` dimensions. On another
# machine the models are the same in distribution, not to the last bit: expect the same picture,
# not the same numbers.
# ```
#
# ````{solution} ex-inflation-dropout
# :class: dropdown
#
# ```{include} ../solutions/core_inflation.md
# :start-after: <!-- ex-inflation-dropout -->
# :end-before: <!-- end ex-inflation-dropout -->
# ```
# ````
