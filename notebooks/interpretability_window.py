# ---
# jupyter:
#   corelib_inputs: [clock_window, recorded]
#   corelib_stores_results: false
#   written_numbers:
#   - abrupt switch at epoch 900
#   - per 1 000 epochs after its branch
#   - removed at epoch 900
#   - with 80 % power
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
# # Beyond the paper: the interpretability window
#
# ```{admonition} In this chapter
# :class: tip
#
# **You will be able to**
# - design a branching experiment with a control (the restarted optimizer) and read its arms;
# - explain why the arms on a fast clock are not a rescaled copy of the same arms on the paper's
#   clock;
# - tell two arms apart with three seeds, and say what three seeds cannot tell apart;
# - size a follow-up experiment: the seeds a test of the means would need, and what that count
#   assumes.
#
# **Before you start**: the chapters {doc}`inflation_clock` (the rescaled time $\tau$ and the
# runs this chapter branches) and {doc}`core_inflation` (arms, branches, snapshots, and the
# paper's arm without weight decay); AdamW's moment estimates.
#
# **Time**: about {glue:text}`time_read` minutes to read, {glue:text}`time_total` with the exercises.
#
# **Computing it** on {glue:text}`cost_machine`: {glue:text}`cost_book` with the book's
# settings, {glue:text}`cost_paper` with the paper's (`--profile paper`).
# ```
#
# The paper ends by proposing to anneal weight decay toward zero shortly after the models
# {term}`grok <grokking>`, to keep the compact {term}`core` that forms there. It calls this the
# {term}`interpretability window`, and it does not test it: it only ran an abrupt switch at
# epoch 900. This chapter tests the window on the runs of {doc}`inflation_clock`.
#
# A run {term}`branches <branch>` at grokking into {term}`arms <arm>`: weight decay kept, removed
# at once, and annealed linearly to zero over two spans. One more arm removes the decay late, and
# asks whether that deflates a core that has grown in the meantime.
#
# **What we will see.** On a fast clock annealing does not keep cores small: it leaves larger
# cores than the control, not smaller ones {claim}`window.anneal_larger <holds>`. On the paper's own clock,
# stopping the decay keeps some models compact and not others. Three seeds cannot tell the
# annealed arms from the control that only restarts the optimizer
# {claim}`window_paper.anneal_below_restart <does not hold>`, nor say how often a model stays
# compact. These are {term}`findings <finding>` of this book, not {term}`claims <claim>` of the
# paper.

# %% tags=["parameters"]
# the window on the paper's clock, read from its record
window_sample_arm = "anneal_short"  # the arm re-derived from the branch
window_check_epochs = 200  # its epochs after the branch (0: none)

# %% tags=["hide-input"]
from myst_nb import glue

from acebook.readability import chapter_time
from acebook.run_times import chapter_cost

cost = chapter_cost("interpretability_window")
glue("cost_machine", cost.machine, display=False)
glue("cost_book", cost.book, display=False)
glue("cost_paper", cost.paper, display=False)
minutes = chapter_time("interpretability_window")
glue("time_read", minutes.reading, display=False)
glue("time_total", minutes.total, display=False)

# %%
import matplotlib.pyplot as plt
from IPython.display import display

from corelib import claims, plots
from corelib.experiments import (
    inflation_clock,
    inflation_clock_window,
    paper_scale,
)

params = inflation_clock_window.WindowParams.from_namespace(globals())

# %% [markdown]
# ## The arms and their control
#
# The arms of this section are the clock chapter's: they run on the clock of
# {glue:text}`window_pair`. They branch at epoch {glue:text}`window_grok` ($\tau =$
# {glue:text}`window_tau_grok`), the first snapshot at which every model has grokked. The late
# removal branches from the kept run later, where $\tau$ reaches the clock chapter's parameter
# `late_removal`.
#
# Annealing lowers the weight decay linearly to zero over a span of $\tau$,
# {glue:text}`anneal_short:g` or {glue:text}`anneal_long:g`. On the paper's clock these spans
# are {glue:text}`anneal_short_paper_epochs` and {glue:text}`anneal_long_paper_epochs` epochs.
# The first epoch after the branch still trains at the full decay, the last one of the ramp at a
# small fraction of it.
#
# Every branch starts with a fresh AdamW, as the paper's arm does. The first steps of a fresh
# AdamW move every weight by about $\eta$, whatever its gradient. So one more arm keeps the decay
# and only restarts the optimizer. This `restarted` arm is the control the others are compared
# with, since the uninterrupted `kept` run has no such restart.
#
# Once the decay is off, $\tau$ stops. What happens after a removal runs on the learning rate
# alone, so a clock with a larger $\eta$ also moves faster there. The window's arms on a fast
# clock are therefore not a rescaled copy of the same arms on the paper's clock.

# %%
fast = inflation_clock.load_window()  # kept by the clock chapter
default = inflation_clock.ClockParams()
claims.record(  # the window's findings on that clock
    "interpretability_window",
    inflation_clock.window_finding_values(fast.window),
    settings=claims.deviations(fast.params, default),
)

# %% tags=["hide-input"]
values = inflation_clock.window_glue_values(fast.params, fast.window)
for name, value in values.items():
    glue(name, value, display=False)
fig = plots.figure_window(fast.curves)
glue("fig_window", fig, display=False)
plt.close(fig)

# %% [markdown]
# ## On a fast clock, annealing does not keep cores smaller
#
# **Annealing leaves larger cores than the control, not smaller ones.** The window the paper
# proposes would show as annealed arms whose cores stay near their size at grokking, while the
# arms with decay grow. Here the opposite happens.
#
# ```{glue:figure} fig_window
# :name: fig-window
#
# **The window's arms**: core dimension, rotational modes and test accuracy, mean ± sem over
# seeds; each arm's branch is dotted in its colour.
# ```
#
# The table gives each arm at the window's end, with the range of the core dimension over the
# seeds and the loss spikes per model and per 1 000 epochs after its branch. Two arms are told
# apart only where their seed ranges do not overlap.

# %%
display(inflation_clock.window_table(fast.window))

# %% [markdown]
# Restarting the optimizer alone already leaves every seed with a larger core than every seed of
# the uninterrupted run {claim}`window.restart_grows <holds>`. That is why the other arms are
# compared with the control. Against it, every seed of both annealed arms ends with a larger core
# still {claim}`window.anneal_larger <holds>`, and none ends below it
# {claim}`window.anneal_smaller <does not hold>`.
#
# Removing the decay at once does not keep the core compact either. Its seeds spread from about
# the control's size, {glue:text}`removed_min:.0f` against {glue:text}`restarted_end`, to
# {glue:text}`removed_max_over_control:.1f` times it. So the removed arm is not told apart from
# the control {claim}`window.removed_smaller <does not hold>`.
#
# Removing the decay late does not shrink the core either
# {claim}`window.late_removal_deflates <does not hold>`. From {glue:text}`late_at_branch`
# dimensions at its branch (epoch {glue:text}`late_branch`), the mean core grows to
# {glue:text}`late_end`, against {glue:text}`kept_end` in the kept run. On this clock the kept
# run had barely grown by the late branch. So this arm cannot show whether a late removal
# deflates a grown core; the paper's clock, below, can.
#
# **Why the fast clock may differ from the paper's Figure 3**, where removing the decay kept
# cores compact. Two differences are built into the design. After a removal, $\tau$ stops and the
# learning rate alone drives the weights, {glue:text}`window_lr_ratio:g` times the paper's here.
# And the fast clock's kept run barely inflates by $\tau =$ {glue:text}`window_horizon:g`, so
# there is little inflation for the window to prevent. No run here tests either difference on
# the fast clock; the next section runs the same arms on the paper's own clock instead.

# %% [markdown]
# ## The same arms on the paper's clock
#
# The clock chapter found that neither $\tau$ nor epochs carries the paper run's inflation over
# to a faster clock. So the same arms were run on the paper's clock, {glue:text}`pw_pair`, with
# {glue:text}`pw_n_seeds` seeds each, over the paper's full run.
#
# They branch from models trained with the paper's settings to grokking, at epoch
# {glue:text}`pw_grok` ($\tau =$ {glue:text}`pw_tau_grok`), and run to epoch
# {glue:text}`pw_end_epoch`. There the two ramps last {glue:text}`pw_anneal_short_epochs` and
# {glue:text}`pw_anneal_long_epochs` epochs.
#
# The late removal branches at $\tau =$ {glue:text}`pw_late_tau:g` (epoch
# {glue:text}`pw_late_branch`). The kept arm is the {term}`recorded run <recorded run>` of the
# core-inflation chapter. The other arms took {glue:text}`pw_training_hours` hours of training,
# summed over arms, so they were trained once and recorded.
#
# ```{admonition} One caution before the results
# :class: note
#
# The kept run was recorded on one machine. The arms branch from the same models trained again
# to grokking on another machine, whose CPU rounds the last bits differently. Their core
# dimensions at grokking are {glue:text}`pw_weights_branch_dims`, against
# {glue:text}`pw_kept_branch_dims` in the kept run shown. The settings and the statistics are
# the same, but the three models are another realisation. So an arm is compared with the kept
# run as two samples of one experiment, not as the same models with and without a change.
# ```

# %%
window_record = paper_scale.recorded_window()
paper = inflation_clock_window.show(
    window_record,
    sample_arm=params.window_sample_arm,
    sample_epochs=params.window_check_epochs,
)
inflation_clock_window.record_claims(paper)

# %% tags=["hide-input"]
for name, value in inflation_clock_window.glue_values(paper).items():
    glue(name, value, display=False)
fig = plots.figure_window(paper.curves)
glue("fig_paper_window", fig, display=False)
plt.close(fig)

# %% [markdown]
# ## On the paper's clock, some models stay compact
#
# **Stopping the decay keeps some models compact, not all.** The kept run inflates. The arms that
# lose their decay at grokking split: some models stay near their size at grokking for the whole
# run, others grow about as large as the kept run's cores.
#
# ```{glue:figure} fig_paper_window
# :name: fig-paper-window
#
# **The window on the paper's clock**: core dimension, rotational modes and test accuracy of
# each arm, mean ± sem over seeds; each arm's branch is dotted in its colour.
# ```
#
# The table gives each arm at three points of the paper's clock: at $\tau =$
# {glue:text}`pw_tau_0:g`, where the fast clock's window ends; halfway; and at the paper's end,
# $\tau =$ {glue:text}`pw_tau_2:g`. The columns are those of the fast clock's table, with the
# spikes counted from each arm's branch up to that point.

# %%
display(inflation_clock_window.tau_table(paper))

# %% [markdown]
# The kept run inflates as the core-inflation chapter showed. From
# {glue:text}`pw_kept_branch_dims` dimensions per seed at grokking, it grows to
# {glue:text}`pw_kept_60_dims` at $\tau =$ {glue:text}`pw_tau_2:g`, every seed above every one
# at grokking {claim}`window_paper.kept_inflates <holds>`.
#
# Removing the decay at grokking leaves two of the three models at or below their size there,
# and lets the third grow about as large as the kept run's cores. From
# {glue:text}`pw_weights_branch_dims` at the branch, the removed arm ends at
# {glue:text}`pw_removed_60_dims`. So it is not told apart from the kept run
# {claim}`window_paper.removed_smaller <does not hold>`.
#
# Annealing over the short ramp ends the same way, at {glue:text}`pw_anneal_short_60_dims`. Over
# the long ramp every model grows part of the way, to {glue:text}`pw_anneal_long_60_dims`. Every
# annealed model ends below every kept one {claim}`window_paper.anneal_smaller <holds>`, but only
# just: the largest annealed core is {glue:text}`pw_anneal_gap:.0f` dimension below the smallest
# kept core.
#
# The control branches as these arms do and only restarts the optimizer; it ends at
# {glue:text}`pw_restarted_60_dims`. The annealed arms do not end below it
# {claim}`window_paper.anneal_below_restart <does not hold>`, and neither does the removed arm
# {claim}`window_paper.removed_below_restart <does not hold>`. No annealed arm stays near its
# size at grokking in every seed {claim}`window_paper.anneal_near_grokking <does not hold>`.
#
# The restarted control ends below most of the kept run's seeds, but its largest core equals the
# kept run's smallest. So the restart alone is not told apart from the uninterrupted run
# {claim}`window_paper.restart_smaller <does not hold>`.
#
# A late removal does not deflate a grown core
# {claim}`window_paper.late_removal_deflates <does not hold>`. The models that lose their decay
# at $\tau =$ {glue:text}`pw_late_tau:g` start from {glue:text}`pw_late_at_branch_dims`
# dimensions and end at {glue:text}`pw_removed_late_60_dims`.
#
# Every model of every arm still generalises at the end
# {claim}`window_paper.all_generalise <holds>`. Loss spikes are rare on this clock: no arm has
# more than {glue:text}`pw_max_spikes` per thousand epochs after its branch at any of the three
# points of the table.

# %% [markdown]
# ## What three seeds can and cannot tell
#
# **Three seeds tell the large effects, not the odds.** They tell that the kept run inflates and
# that the annealed models end a little below the kept ones. They also tell that some models keep
# a compact core for the whole run once the decay stops, which no kept model does. They cannot
# tell whether
# stopping the decay makes a compact core more likely than a restart alone does. The arms' seeds
# split into compact and grown cores, and a split of three says little about its odds.
#
# How many seeds would do? A $t$-test of the means would need {glue:text}`pw_seeds_removed` seeds
# per arm to tell the removed arm from the kept run with 80 % power, if the spreads were what
# three seeds show. It would need {glue:text}`pw_seeds_anneal_short` and
# {glue:text}`pw_seeds_anneal_long` for the two ramps, and {glue:text}`pw_seeds_restarted` for
# the restart.
#
# But a split into two kinds of outcome is not the normal spread that this count assumes. The
# question to ask of more seeds is the share of models that stay compact in each arm. Pinning a
# share down to within a few tenths takes dozens of seeds per arm.

# %% tags=["hide-input"]
cost = paper_scale.seed_cost_values(
    window_record, paper_scale.recorded_gpu_times(), seeds=24)
for name, value in cost.items():
    glue(name, value, display=False)

# %% [markdown]
# **What dozens of seeds would cost.** With {glue:text}`cost_seeds` seeds per arm, the window's
# five branched arms would take about {glue:text}`cost_cpu_hours` hours on the CPU that ran the
# record ({glue:text}`cost_cpu`): on a CPU each model of a stack costs about what it costs alone.
# On a GPU the steps are bound by kernel launches, so the number of seeds barely matters. At the
# time per epoch measured on an {glue:text}`cost_gpu`, the same arms would take about
# {glue:text}`cost_gpu_minutes` minutes. No GPU was lent to this book's last runs, so this run
# waits for one.

# %% [markdown]
# ## Beside the fast clock
#
# **The fast clock's answer does not carry over to the paper's clock.** On the fast clock every
# annealed seed ended with a larger core than every seed of the restarted control. On the
# paper's clock the annealed and removed arms hold the smallest cores of the whole experiment,
# in the seeds that stay compact.
#
# The larger learning rate that drives a fast clock's weights once the decay is off would explain
# the difference, but no run here isolates it: that stays an open question. The paper's proposal
# survives in a weaker form than it was made. Stopping the decay at grokking can keep a compact
# core, but here it did so for some models and not others, and nothing in these runs says in
# advance which.

# %% [markdown]
# ## Summary
#
# - **On a fast clock, annealing does not keep cores smaller.** Annealing the decay after
#   grokking did not keep the core compact: the annealed arms end with larger cores than the restarted control
#   {claim}`window.anneal_larger <holds>`, itself larger than the uninterrupted run
#   {claim}`window.restart_grows <holds>`. That clock's kept run barely inflates, though, so it
#   leaves the window little to prevent. Removing the decay late made the core grow rather than
#   shrink {claim}`window.late_removal_deflates <does not hold>`, from a core that had not grown.
# - **On the paper's clock, some models stay compact.** Stopping the decay at grokking kept a
#   compact core for the whole run in some models and not in others. The annealed models all
#   ended below the inflating kept run, by a small margin
#   {claim}`window_paper.anneal_smaller <holds>`, but not below the control that only restarts
#   the optimizer {claim}`window_paper.anneal_below_restart <does not hold>`. A late removal did
#   not deflate a grown core {claim}`window_paper.late_removal_deflates <does not hold>`.
# - **What differs from the paper.** The paper proposes the window without testing it. Its
#   Figure 3 shows a compact core when the decay is removed at epoch 900. Here, removing it at
#   grokking on the paper's clock kept some models compact and let another grow about as large
#   as the kept run's cores, so the removed arm is not told apart from the kept run
#   {claim}`window_paper.removed_smaller <does not hold>`. On the fast clock, removal did not
#   leave smaller cores than the control either {claim}`window.removed_smaller <does not hold>`.
# - **What is open.** The share of models that stay compact when the decay stops, which takes
#   dozens of seeds per arm. What decides which models stay compact. And whether the fast clock's
#   larger learning rate after a removal is why annealing fails to keep its cores small there.
#
# ## How this chapter computes
#
# The arms on the fast clock are the clock chapter's. `inflation_clock.run` trains them, or
# reads them from that chapter's record, and `inflation_clock.save_window` keeps them in the
# results folder (`clock_window/`). This chapter reads them back with
# `inflation_clock.load_window`. Its header declares that folder as an input, so the runner runs
# this chapter again whenever the clock chapter keeps another window.
#
# The window on the paper's clock is recorded (`recorded/inflation_clock_window_paper`, read in
# every profile). A build trains the first `window_check_epochs` epochs of one arm again, from
# the recorded weights at the branch, and compares them with the record as the clock chapter
# compares its own. This one re-derived {glue:text}`pw_checked_after` epochs of the
# {glue:text}`pw_sample_arm` arm (none where the profile sets none).
#
# Of the {glue:text}`pw_checked_quantities` quantities compared, {glue:text}`pw_quantities_moved`
# moved in some seed, as they do where the CPU rounds differently from the record's. In their
# mean over the seeds, {glue:text}`pw_quantities_beyond` moved by more than
# {glue:text}`pw_seed_errors` standard errors.

# %% [markdown]
# ## Exercises
#
# Difficulty 🔴 (of five) and importance 🔵 (of five) follow the ARENA course's conventions.
#
# ```{exercise} What three seeds can tell apart
# :label: ex-window-apart
#
# 🔴🔴⚪⚪⚪ · 🔵🔵🔵🔵🔵 · about 10 minutes
#
# The chapter tells two arms apart only when the ranges of their seeds do not overlap. Write
# `told_apart(a, b)` for two lists of per-seed values: $+1$ when every value of `a` exceeds every
# value of `b`, $-1$ when every one is below, 0 otherwise. Then explain why comparing the means
# would mislead with three seeds, using the removed arm of the fast clock's table (its range is
# wide).
#
# **Expected result**: $+1$ for the fast clock's annealed arm (seeds from 22 to 37) against the
# kept one (13 to 15), 0 for ranges that overlap or touch; the check prints "all 6 cases pass".
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# Two ranges lie apart when the smallest value of one exceeds the largest of the other.
# ```

# %%
from corelib.exercises import interpretability_window as ex


def told_apart(a, b):
    """+1, -1 or 0: whether the seed ranges of a and b lie apart."""
    raise NotImplementedError  # your code here


ex.check_told_apart(told_apart);

# %% [markdown]
# ````{solution} ex-window-apart
# :class: dropdown
#
# ```{include} ../solutions/interpretability_window.md
# :start-after: <!-- ex-window-apart -->
# :end-before: <!-- end ex-window-apart -->
# ```
# ````
#
# ```{exercise} The decay along a ramp
# :label: ex-window-decay
#
# 🔴🔴⚪⚪⚪ · 🔵🔵🔵⚪⚪ · about 10 minutes
#
# An annealed arm lowers the weight decay linearly from $\omega$ at its branch to zero over
# `ramp` epochs. Write `decay_in_epoch(done, branch, ramp, wd)`, the weight decay of the epoch
# that follows `done` epochs of training. It is the full `wd` up to the branch and in the first
# epoch after it. Then it falls by `wd / ramp` per epoch, and it is zero from the end of the ramp
# on. `ramp = 0` removes the decay at once: the first epoch after the branch already trains
# without it.
#
# Then say what decay the paper clock's short ramp leaves 100 epochs after its branch, and when
# the long ramp reaches half the decay.
#
# **Expected result**: four fifths of the decay 100 epochs into the short ramp of 500 epochs;
# the long ramp of 2 000 epochs reaches half of it 1 000 epochs after the branch; the check
# prints "all 9 cases pass".
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# Count the epochs since the branch, `done - branch`: at 0 the decay is still `wd`, at `ramp` it
# is zero. Treat `ramp = 0` on its own, before dividing by it.
# ```

# %%
def decay_in_epoch(done, branch, ramp, wd):
    """Weight decay of the epoch after `done` epochs (a float)."""
    raise NotImplementedError  # your code here


ex.check_decay_in_epoch(decay_in_epoch);

# %% [markdown]
# ````{solution} ex-window-decay
# :class: dropdown
#
# ```{include} ../solutions/interpretability_window.md
# :start-after: <!-- ex-window-decay -->
# :end-before: <!-- end ex-window-decay -->
# ```
# ````
#
# ```{exercise} How many seeds would tell them apart?
# :label: ex-window-seeds
#
# 🔴🔴🔴⚪⚪ · 🔵🔵🔵🔵⚪ · about 15 minutes
#
# Ranges that overlap are not told apart, but more seeds might separate them. Suppose a
# difference $d$ of two arms' mean core dimensions and a spread $s$ over seeds (the sample
# standard deviation, pooled over both arms) are what the record measured. A two-sided
# $z$-test at the 5 % level on the means of $n$ seeds per arm then has 80 % power when
# $|d| / (s\sqrt{2/n}) \ge z_{0.975} + z_{0.8}$. Write `seeds_for_power(a, b)`, the smallest
# such whole $n$ (at least 2) for the per-seed values `a` and `b`, whose means differ.
#
# Then apply it to the paper clock's arms. An arm's per-seed core dimensions at the end are
# `paper.curves[arm].core_dim[-1]`, NaN where a seed has none. Compare your counts with the
# seeds the chapter quotes above, which come from the exact $t$-test. Why does the $t$-test ask
# for a seed or two more? Why does a test of the means need fewer seeds than ranges that stop
# overlapping? And what does the count assume?
#
# **Expected result**: 2 seeds for the fast clock's annealed arm (22, 31, 37) against the kept
# one (13, 14, 15) and 7 for (40, 52, 61) against (36, 38, 42); the check prints "all 5 cases
# pass".
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# `scipy.stats.norm.ppf(0.975)` and `norm.ppf(0.8)` give the two quantiles; pool the variances
# as $((n_a - 1)s_a^2 + (n_b - 1)s_b^2) / (n_a + n_b - 2)$.
# ```

# %%
def seeds_for_power(a, b):
    """Seeds per arm for 80 % power at the 5 % level (an int >= 2)."""
    raise NotImplementedError  # your code here


ex.check_seeds_for_power(seeds_for_power);

# %% [markdown]
# ````{solution} ex-window-seeds
# :class: dropdown
#
# ```{include} ../solutions/interpretability_window.md
# :start-after: <!-- ex-window-seeds -->
# :end-before: <!-- end ex-window-seeds -->
# ```
# ````
#
# ```{exercise} Why tau stops
# :label: ex-window-stops
#
# 🔴🔴🔴⚪⚪ · 🔵🔵🔵⚪⚪ · about 15 minutes, pen and paper
#
# After the decay is removed, $\tau = \eta\omega n$ no longer grows. Argue why the arms of the
# window on a fast clock are not a rescaled copy of the same arms on the paper's clock, even
# though their branch is at the same $\tau$. What does the `restarted` arm control for, and what
# would you conclude if it ended far from the `kept` run?
#
# **Expected result**: two reasons (the step size after removal is $\eta$, not $\eta\omega$;
# a fresh AdamW's first steps move every weight by about $\eta$), and the restart as the control
# for the second.
# ```
#
# ````{solution} ex-window-stops
# :class: dropdown
#
# ```{include} ../solutions/interpretability_window.md
# :start-after: <!-- ex-window-stops -->
# :end-before: <!-- end ex-window-stops -->
# ```
# ````
#
# ```{exercise} The window on a faster clock, in a few minutes
# :label: ex-window-class
#
# 🔴🔴⚪⚪⚪ · 🔵🔵🔵⚪⚪ · about 10 minutes, most of it waiting
#
# The clock chapter's book settings take about two hours of training, which is why they are
# recorded. Its `class` profile runs the whole experiment at twelve times the paper's
# $\eta\omega$ with two seeds to $\tau = 6$: `ace-book run inflation_clock --profile class`. It
# took about 4 minutes of one core (246 s of CPU time, measured on an AMD EPYC while other work
# shared the machine). Then `ace-book run interpretability_window --profile class` shows its
# window.
#
# Before running them, predict from this chapter whether the annealed arms will end with smaller
# cores than the kept run. Then read the window's table and the warning at the top of the page,
# which lists the sentences of this chapter whose premises the new run does not share.
#
# **Expected result**: the models grok near $\tau = 4$ (epoch 119); the arms end at epoch 170,
# and the warning at the top of the page names the findings whose status changed.
# ```
#
# ````{solution} ex-window-class
# :class: dropdown
#
# ```{include} ../solutions/interpretability_window.md
# :start-after: <!-- ex-window-class -->
# :end-before: <!-- end ex-window-class -->
# ```
# ````
