# ---
# jupyter:
#   corelib_inputs: [recorded]
#   written_numbers:
#   - 12 seeds for each of six weight decays and seven moduli, up to 30 000 epochs each
#   - 2.5–97.5 % percentiles
#   - within 10 % of the paper's
#   - more than the 10 % the claims page allows
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
# # Grokking sweeps: how the delay scales with weight decay and modulus
#
# ```{admonition} In this chapter
# :class: tip
#
# **You will be able to**
# - measure, from a model's accuracy after every step, when it memorised, when it generalised
#   and the grokking delay between the two, and say which seeds have no delay;
# - fit the power law $\tau \propto \omega^\beta$ in log–log space and compare its exponent with
#   the theory's $-1$;
# - fit the solution $\tau(p) = -\Omega\log(1 - p_{\rm crit}/p)$ of the margin ODE to delays at
#   several moduli, and explain why $\Omega$ and $p_{\rm crit}$ come out correlated;
# - tell a reduced sweep's fitted constants from the paper-scale sweep's, and say which one the
#   paper's claims are judged on.
#
# **Before you start**: the chapters {doc}`modular_addition` (grokking on modular addition) and
# {doc}`grokking_theory` (the margin model that predicts the delay); logarithms, least squares,
# and the bootstrap.
#
# **Time**: about {glue:text}`time_read` minutes to read, {glue:text}`time_total` with the exercises.
#
# **Computing it** on {glue:text}`cost_machine`: {glue:text}`cost_book` with the book's
# settings, {glue:text}`cost_paper` with the paper's (`--profile paper`).
# ```
#
# A transformer trained on half of the pairs $(a, b)$ of modular addition first **memorises** its
# training pairs and only much later **generalises** to the held-out ones. The previous chapter
# modelled that *{term}`grokking delay`* $\tau = \tau_{\rm gen} - \tau_{\rm mem}$ as the time the
# logit {term}`margin` of the Fourier solution takes to grow past a threshold under
# {term}`weight decay` $\omega$. The model predicts two laws:
#
# 1. at a fixed modulus $p$, $\tau \propto 1/\omega$: weight decay sets the time scale;
# 2. at a fixed $\omega$, $\tau(p) = -\Omega\log(1 - p_{\rm crit}/p)$: the delay falls with the
#    modulus, and grows without bound as $p$ comes down to a {term}`critical modulus`
#    $p_{\rm crit}$. In the model, a larger modulus has more equivalent Fourier modes to share
#    the work of building the margin.
#
# The paper tests both on trained transformers (its Figure 4). A **weight-decay sweep** at
# $p = 53$ gives a power law with exponent $\beta \approx -1.02$. A **modulus sweep** at
# $\omega = 1$ fits the ODE solution with $\Omega \approx 2770$ steps and
# $p_{\rm crit} \approx 23$. We run both sweeps with the paper's model and method, fit them the
# same way, and put error bars on the fitted constants with a bootstrap over seeds.
#
# The paper's sweeps are large: 12 seeds for each of six weight decays and seven moduli, up to
# 30 000 epochs each, many CPU hours. This chapter runs a reduced sweep, set by the parameters
# below: fewer seeds and conditions, and the modulus sweep at a larger weight decay, where the
# predicted delays are shorter. It also shows the paper-scale sweep, which was run once and is
# kept in the repository (`recorded/grokking_sweeps_paper`). The paper's
# {term}`claims <claim>` are judged on that {term}`recorded sweep <recorded run>`. Rerun the
# reduced one with your own settings, e.g.
# `ace-book run grokking_sweeps -p omegas "[0.5, 1, 2, 3]" -p n_seeds 4`.

# %% tags=["parameters"]
n_seeds = 3  # models per condition, seeds 42, 43, ... (paper: 12)
omega_p = 53  # modulus of the weight-decay sweep
omegas = [1.0, 2.0, 3.0]  # weight decays (paper: 0.3 0.5 1 1.5 2 3)
omega_batch_size = 512  # minibatch size of that sweep (None: full batch)
omega_max_epochs = 3000  # cap per condition (paper: 30000)
moduli = [43, 61, 79]  # moduli (paper: 31 43 53 61 79 89 101)
p_weight_decay = 3.0  # weight decay of the modulus sweep (paper: 1)
p_batch_size = None  # None: full batch (the paper's modulus sweep)
p_max_epochs = 4000  # cap per condition of that sweep (paper: 30000)
d_model = 128
n_heads = 4
d_ff = 512
n_layers = 1
lr = 1e-3
dropout = 0.1  # in training only (PyTorch's layer default); 0: none
train_fraction = 0.5  # share of the p^2 pairs used for training
split_seed = 42  # permutation of the pairs before the split
threshold = 0.99  # accuracy that counts as memorised or generalised
patience_epochs = 10  # epochs run after generalising (paper: 100)
precision = "fp32"  # or "bf16", or "auto" (bf16 where native)
n_boot = 1000  # bootstrap replicates for the fitted constants' spread
# None follows joblib's configuration (1 process unless configured)
n_jobs = None  # joblib processes for the conditions

# %% tags=["hide-input"]
from myst_nb import glue

from acebook.readability import chapter_time
from acebook.run_times import chapter_cost

cost = chapter_cost("grokking_sweeps")
glue("cost_machine", cost.machine, display=False)
glue("cost_book", cost.book, display=False)
glue("cost_paper", cost.paper, display=False)
minutes = chapter_time("grokking_sweeps")
glue("time_read", minutes.reading, display=False)
glue("time_total", minutes.total, display=False)

# %%
import matplotlib.pyplot as plt
from IPython.display import display
from myst_nb import glue

from acebook.claims_page import chapter_frame
from corelib import claims, plots
from corelib.experiments import grokking_sweeps, paper_scale
from corelib.experiments import grokking_sweeps_moduli as near_moduli

params = grokking_sweeps.SweepsParams.from_namespace(globals())
plots.use_book_style()

# %% [markdown]
# ## Two times and a delay
#
# Every model is the paper's: one post-norm transformer block (width {glue:text}`d_model`, MLP
# {glue:text}`d_ff`) trained with AdamW ({term}`learning rate` {glue:text}`lr`, dropout
# {glue:text}`dropout` during training) on half of the $p^2$ pairs, scored on $(a + b) \bmod p$
# at the last position. For each seed,
#
# - $\tau_{\rm mem}$ is the first optimizer step after which the accuracy on the **whole**
#   training set is at least {glue:text}`threshold_pct` %,
# - $\tau_{\rm gen}$ the same on the whole test set, and the delay is
#   $\tau = \tau_{\rm gen} - \tau_{\rm mem}$.
#
# The accuracy is checked after every step, so the times carry no rounding from an evaluation
# interval ({ref}`sweeps-computes` says how that stays cheap). A seed has a delay only when it
# both memorised and generalised before the cap, and generalised *after* it memorised. As in the
# paper's reference code, only such seeds enter the means and the fits. In
# {ref}`sweeps-ex-times` you write this rule yourself.

# %%
summary = grokking_sweeps.run(params)
display(summary.summary_omega.round(1))
display(summary.summary_p.round(1))

# %% [markdown]
# Per condition, the tables give the mean times, in optimizer steps, of the seeds with a delay,
# and count three kinds of seed:
#
# - `n_grokked`: seeds with a delay;
# - `n_missing`: seeds that did not both memorise and generalise before the cap;
# - `n_nonpositive`: seeds that generalised no later than they memorised.
#
# ## Fitting the two laws
#
# Both fits see one point per condition, the mean delay of its grokked seeds, as in the paper.
# The power law is fitted by ordinary least squares on $\log\bar\tau$ against $\log\omega$. The
# ODE solution is fitted by non-linear least squares (`corelib.theory.fit_grok_time`). The seeds
# enter through the uncertainties: {glue:text}`n_boot` bootstrap replicates resample the seeds
# of every condition, recompute the means and refit.

# %%
claims.record(  # for the claims page
    "grokking_sweeps", grokking_sweeps.claim_values(summary),
    settings=grokking_sweeps.claim_settings(params))

# %% tags=["hide-input"]
fig = plots.figure_sweeps(summary)
glue("fig_sweeps", fig, display=False)
plt.close(fig)

# %% [markdown]
# The figure shows this build's two sweeps, each with its fitted law: the weight-decay sweep
# with batch size {glue:text}`omega_batch`, the modulus sweep with batch size
# {glue:text}`p_batch`. The table below it gives the fitted constants with their bootstrap
# spread.
#
# ```{glue:figure} fig_sweeps
# :name: fig-sweeps
#
# **The delay against weight decay and modulus (this build's sweep).** Grokking delay in
# optimizer steps, for each seed (grey) and as mean ± sd over seeds (black). Left: weight decays
# {glue:text}`omegas_text` at $p =$ {glue:text}`omega_p`, with the power law fitted in log–log
# space. Right: moduli {glue:text}`moduli_text` at $\omega =$ {glue:text}`p_omega`, with the
# fitted ODE solution and the paper's curve, its $\Omega$ divided by $\omega$ as the theory
# predicts.
# ```
#
# The fitted constants of this build's sweeps: estimate, standard deviation and 2.5–97.5 %
# percentiles over the bootstrap replicates. The column "paper" has the paper's values, its
# $\Omega$ and $\Omega\,p_{\rm crit}$ divided by this sweep's weight decay.

# %%
display(grokking_sweeps.styled_constants_table(summary))

# %% [markdown]
# Of this build's {glue:text}`n_runs` runs, {glue:text}`n_grokked` have a delay.
#
# **Weight decay.** The mean delay goes from {glue:text}`w_first_delay` steps at
# $\omega =$ {glue:text}`w_first` to {glue:text}`w_last_delay` at $\omega =$
# {glue:text}`w_last`.
#
# The power law fitted to these means has exponent $\beta =$ {glue:text}`beta` ±
# {glue:text}`beta_sd`. The paper reports {glue:text}`paper_omega_exponent`, the theory $-1$.
#
# **Modulus.** The mean delay goes from {glue:text}`p_first_delay` steps at $p =$
# {glue:text}`p_first` to {glue:text}`p_last_delay` at $p =$ {glue:text}`p_last`.
#
# The ODE solution fits $\Omega =$ {glue:text}`Omega` steps and $p_{\rm crit} =$
# {glue:text}`p_crit`. The theory has $\Omega \propto 1/\omega$, so rescaled to $\omega = 1$
# this $\Omega$ is {glue:text}`Omega_at_1` steps. The paper has {glue:text}`paper_Omega` steps
# and $p_{\rm crit} =$ {glue:text}`paper_p_crit`.
#
# How well are the two constants determined? For $p$ well above $p_{\rm crit}$,
# $-\log(1 - p_{\rm crit}/p) \approx p_{\rm crit}/p$, so the delays pin down mainly the product
# $\Omega\,p_{\rm crit}$ ({ref}`sweeps-ex-product` works this out). In this build's bootstrap,
# the sd of $\Omega$ is {glue:text}`rel_Omega` % of its estimate, that of $p_{\rm crit}$
# {glue:text}`rel_p_crit` %, and that of their product {glue:text}`rel_product` %.
#
# ## At the paper's scale: the recorded sweeps
#
# The recorded sweep is the one the paper's claims are judged on. Its delays follow both laws
# closely: a power law in the weight decay with the paper's exponent, and the ODE curve across
# moduli with the paper's critical modulus. Only the time constant $\Omega$ differs from the
# paper's by more than the claims page allows. The end of this section shows why that one
# constant is hard to pin down.
#
# The sweep has {glue:text}`rec_n_seeds` seeds for each of {glue:text}`rec_n_omegas` weight
# decays and {glue:text}`rec_n_moduli` moduli, with caps of {glue:text}`rec_cap` epochs. Its
# per-seed records are summarised and fitted exactly as this build's own. (In a checkout without
# it, the numbers below read n/a.)

# %%
recorded = paper_scale.recorded_sweeps()
near = paper_scale.recorded_near_moduli(recorded)
paper_scale.record_claims("grokking_sweeps", recorded, near=near)

# %% tags=["hide-input"]
values = grokking_sweeps.glue_values(summary, recorded)
for name, value in values.items():
    glue(name, value, display=False)

# %% tags=["hide-input"]
fig = plots.figure_recorded_sweeps(recorded)
glue("fig_sweeps_recorded", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_sweeps_recorded
# :name: fig-sweeps-recorded
#
# **The recorded paper-scale sweeps**, drawn as {numref}`fig-sweeps`:
# {glue:text}`rec_n_grokked` of their {glue:text}`rec_n_runs` runs have a delay.
# ```
#
# **Weight decay.** The mean delay falls from {glue:text}`rec_w_first_delay` steps at
# $\omega =$ {glue:text}`rec_w_first` to {glue:text}`rec_w_last_delay` at $\omega =$
# {glue:text}`rec_w_last`.
#
# **Modulus.** The mean delay falls from {glue:text}`rec_p_first_delay` steps at $p =$
# {glue:text}`rec_p_first` to {glue:text}`rec_p_last_delay` at $p =$ {glue:text}`rec_p_last`.
#
# The fitted constants of the recorded sweep, beside the paper's (its modulus sweep ran at the
# paper's $\omega = 1$, so no rescaling is needed):

# %%
if recorded is not None:
    display(grokking_sweeps.styled_constants_table(recorded))

# %% [markdown]
# **The weight-decay law holds.** The fitted exponent is $\beta =$ {glue:text}`rec_beta` ±
# {glue:text}`rec_beta_sd`, close to the paper's {glue:text}`paper_omega_exponent`
# {claim}`sweeps.omega_exponent <reproduced>`. Its bootstrap interval also covers the
# theory's $-1$.
#
# **The modulus law holds.** The ODE curve fits the mean delays closely, with
# $R^2 =$ {glue:text}`rec_r2_p` {claim}`sweeps.r2_p <reproduced>`. The critical modulus,
# $p_{\rm crit} =$ {glue:text}`rec_p_crit`, lies within 10 % of the paper's
# {glue:text}`paper_p_crit` {claim}`sweeps.p_crit <reproduced>`.
#
# **The time constant differs.** The fit gives $\Omega =$ {glue:text}`rec_Omega_at_1` steps,
# {glue:text}`rec_Omega_vs_paper_pct` % above the paper's {glue:text}`paper_Omega`
# {claim}`sweeps.Omega <differs>`. That is more than the 10 % the claims page allows.
#
# **Why only $\Omega$?** The moduli of the sweep lie well above $p_{\rm crit}$, where the delays
# pin down mainly the product $\Omega\,p_{\rm crit}$. Its bootstrap sd is
# {glue:text}`rec_rel_product` % of it, against {glue:text}`rec_rel_Omega` % for $\Omega$ alone.
# The product, {glue:text}`rec_product_at_1` ± {glue:text}`rec_product_at_1_sd` steps, agrees
# with the paper's {glue:text}`paper_product` to within its spread. The paper's $\Omega$ also
# lies inside our bootstrap interval (the table).
#
# ### Moduli near the critical modulus
#
# **Near $p_{\rm crit}$ the two constants come apart.** There $-\log(1 - p_{\rm crit}/p)$ is far
# from $p_{\rm crit}/p$, so the delays no longer depend on the product alone. We trained the
# modulus sweep at $p =$ {glue:text}`near_moduli` with the paper's settings and added it to the
# recorded sweep: {glue:text}`near_grokked` of its {glue:text}`near_runs` runs grokked before
# the cap.

# %% tags=["hide-input"]
wd = recorded.params.p_weight_decay if recorded else None
for name, value in near_moduli.glue_values(near, wd).items():
    glue(name, value, display=False)
hours = near_moduli.modulus_sweep_hours(recorded)
glue("p_sweep_hours", hours, display=False)

# %%
if near is not None:
    display(near_moduli.fits_table(near, wd))

# %% [markdown]
# With them, the bootstrap sd of $\Omega$ falls from {glue:text}`far_Omega_sd_pct:.0f` % to
# {glue:text}`near_Omega_sd_pct:.0f` % of its estimate {claim}`sweeps.near_Omega_sd <holds>`,
# and that of $p_{\rm crit}$ from {glue:text}`far_p_crit_sd:.1f` to
# {glue:text}`near_p_crit_sd:.1f`.
#
# The fit gives $\Omega =$ {glue:text}`near_Omega` steps at
# $\omega = 1$, now within 10 % of the paper's {claim}`sweeps.near_Omega <holds>`, and
# $p_{\rm crit} =$ {glue:text}`near_p_crit:.1f`. So the recorded sweep's $\Omega$ differed
# because its moduli could not split the product, as the previous paragraph suspected.
#
# ## The paper's claims
#
# This chapter's rows of the [claims page](claims.ipynb). The claims are judged on the recorded
# paper-scale sweep. The column "this build" gives what this build's reduced sweep measured.
# With fewer seeds and conditions than the paper's, it is "measured at reduced settings",
# whatever its numbers.

# %%
display(chapter_frame("grokking_sweeps"))

# %% [markdown]
# ## Summary
#
# The paper's sweep claims are judged on the recorded paper-scale sweep.
#
# - **Weight decay sets the time scale.** The delay falls as a power of the weight decay with the
#   paper's exponent {claim}`sweeps.omega_exponent <reproduced>`. The exponent's bootstrap
#   interval also covers the theory's $-1$.
# - **The modulus law.** The solution of the margin ODE fits the delays across moduli closely
#   {claim}`sweeps.r2_p <reproduced>`, with a critical modulus within 10 % of the paper's
#   {claim}`sweeps.p_crit <reproduced>`. Its {term}`time constant <optimizer constant>`
#   $\Omega$ comes out above the paper's, by more than the 10 % the claims page allows
#   {claim}`sweeps.Omega <differs>`.
#
# **What differs, and a likely reason.** Only $\Omega$ differs beyond the claims page's
# tolerance. The moduli of the sweep lie well above $p_{\rm crit}$, where the delays pin down
# the product $\Omega\,p_{\rm crit}$ far better than either constant (the bootstrap spreads
# above). The product agrees with the paper's to
# within its spread, and the paper's $\Omega$ lies inside our bootstrap interval. Adding moduli
# near $p_{\rm crit}$ confirms it: they halve the spread of $\Omega$, and the fit then lands
# within 10 % of the paper's value {claim}`sweeps.near_Omega <holds>`.
#
# A sweep at reduced settings, such as the book {term}`profile's <profile>`, is "measured at
# reduced settings" whatever its numbers. Its values are given above with their bootstrap
# spread, and the claims are not judged on them.
#
# **What is open.** The recorded sweep tests $\Omega \propto 1/\omega$ only through the
# weight-decay sweep at one modulus, not through the modulus law at several weight decays.
# {ref}`sweeps-ex-predict` tries one such condition; the whole modulus sweep at a second weight
# decay (`python -m acebook.paper_runs advance grokking_sweeps --p-weight-decay 2`) has not been
# run: at the paper's weight decay the modulus sweep took about
# {glue:text}`p_sweep_hours:.1f` CPU hours on the recorded machine.
#
# (sweeps-computes)=
# ## How this chapter computes
#
# **Exact times, cheaply.** Checking the accuracy on both sets after every step sounds like two
# passes over the data per step. But the threshold allows only a fixed number of errors: at
# $p =$ {glue:text}`omega_p`, {glue:text}`budget_omega_p` of the
# {glue:text}`n_train_omega_p` training pairs. So `corelib.tasks.sweeps` visits the examples in a
# fixed random order and stops as soon as a model has made one error too many. A model far below
# the threshold is caught within the first few dozen examples. A model that passes is checked on
# every example, so the answer is exact either way ({ref}`sweeps-ex-early-exit`).
#
# Seeds that have memorised skip the training check, and seeds that have generalised skip the
# test check. With full batches and no dropout, the forward pass of step $t$ already is the
# training-set check of the weights after step $t - 1$, and is used as such. A stopping seed
# gets one explicit check of its last weights. `tests/test_sweeps.py` checks that the times
# found are those of a naive full evaluation after every step.
#
# **Seeds and conditions.** All seeds of a condition train together as one vectorised model
# (`corelib.engine`). Each has its own initialisation, data order, dropout stream and optimizer
# state. A seed stops {glue:text}`patience` epochs after it generalised (or at the cap) and
# leaves the stack. Conditions are independent [joblib](https://joblib.readthedocs.io) jobs, so
# `joblib.parallel_config(backend="dask")` runs them on a Dask cluster.
#
# **Minibatches** follow the reference code: each seed draws a fresh permutation of the training
# pairs whenever the next batch would run past its end. So at $p =$ {glue:text}`omega_p` with
# batch size {glue:text}`omega_batch`, a permutation gives {glue:text}`steps_per_permutation`
# steps and skips its last {glue:text}`skipped` pairs. Caps and patience count epochs of
# {glue:text}`steps_per_epoch` steps.
#
# **Records.** Each (condition, seed) result is stored as soon as the seed stops, so an
# interrupted sweep resumes with the missing seeds and a finished one is read from disk.
#
# The recorded paper-scale sweep is the {glue:text}`rec_source`, in
# {glue:text}`rec_precision`. Its settings that differ from the paper's:
# {glue:text}`rec_deviations`. The command {glue:text}`rec_rederive` re-derives one of its
# conditions from scratch and compares the records.
#
# It was made by `ace-book run grokking_sweeps --profile paper`: {glue:text}`rec_hours` h of
# training summed over its {glue:text}`rec_n_timed` timed conditions, each on one thread with
# its seeds stacked.
#
# ## Exercises
#
# Difficulty 🔴 (of 🔴🔴🔴🔴🔴) and importance 🔵 (of 🔵🔵🔵🔵🔵) follow the conventions of the
# ARENA course. A coding exercise gives a stub; fill it in and run the check below it, which
# calls your function on several cases and says what is wrong.
#
# ```{exercise} Memorised, generalised, grokked
# :label: sweeps-ex-times
#
# 🔴🔴⚪⚪⚪ · 🔵🔵🔵🔵⚪ · about 15 minutes
#
# Write `grok_times(train_acc, test_acc, threshold)`. Its inputs are one seed's accuracies on the
# training and the test set after every optimizer step (element $k$ after step $k + 1$). Return
# `(t_mem, t_gen, delay)`: the first step at which each accuracy is at least `threshold`, and
# $t_{\rm gen} - t_{\rm mem}$; `None` for a time never reached, and for the delay unless both
# times exist and $t_{\rm gen} > t_{\rm mem}$. Why should a seed that generalised no later than
# it memorised stay out of the mean delay?
#
# **Expected result**: `(570, 2192, 1622)` on `ex.example_curves()` (synthetic curves of one
# seed at $p = 53$); the check prints "all 9 cases pass".
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# `np.flatnonzero(acc >= threshold)` lists the indices at or above the threshold; the first one
# is an index, not yet a step.
# ```

# %%
from corelib.exercises import grokking_sweeps as ex


def grok_times(train_acc, test_acc, threshold=0.99):
    """(t_mem, t_gen, delay) in optimizer steps; None if absent."""
    raise NotImplementedError  # your code here


ex.check_grok_times(grok_times);

# %% [markdown]
# ````{solution} sweeps-ex-times
# :class: dropdown
#
# ```{include} ../solutions/grokking_sweeps.md
# :start-after: <!-- sweeps-ex-times -->
# :end-before: <!-- end sweeps-ex-times -->
# ```
# ````
#
# ```{exercise} The exponent of the weight-decay law
# :label: sweeps-ex-powerlaw
#
# 🔴🔴⚪⚪⚪ · 🔵🔵🔵⚪⚪ · about 15 minutes
#
# Write `power_law(x, y)`, returning the exponent $\beta$ and the prefactor $C$ of
# $y = C x^\beta$ fitted by least squares of $\log y$ on $\log x$. Then fit the recorded
# paper-scale sweep's mean delays, `recorded.summary_omega["delay_mean"]` (indexed by the
# weight decay). What does $C$ mean?
#
# **Expected result**: the check prints "all 6 cases pass"; on the recorded means
# $\beta = -1.021$ and $C \approx 1590$ steps.
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# `np.polyfit(np.log(x), np.log(y), 1)` returns the slope and the intercept of the line.
# ```

# %%
def power_law(x, y):
    """(beta, C) of y = C x**beta, fitted in log-log space."""
    raise NotImplementedError  # your code here


ex.check_power_law(power_law);

# %% [markdown]
# ````{solution} sweeps-ex-powerlaw
# :class: dropdown
#
# ```{include} ../solutions/grokking_sweeps.md
# :start-after: <!-- sweeps-ex-powerlaw -->
# :end-before: <!-- end sweeps-ex-powerlaw -->
# ```
# ````
#
# ```{exercise} Which constant do the moduli pin down?
# :label: sweeps-ex-product
#
# 🔴🔴🔴⚪⚪ · 🔵🔵🔵⚪⚪ · about 15 minutes, pen and paper
#
# Expand $\tau(p) = -\Omega\log(1 - p_{\rm crit}/p)$ for $p \gg p_{\rm crit}$ to second order
# in $p_{\rm crit}/p$. Show that to first order the delays depend on $\Omega$ and
# $p_{\rm crit}$ only through their product. With $p_{\rm crit} \approx 21$, by how much does
# the full curve exceed the first-order one at $p = 101$ and at $p = 31$? Which moduli would you
# add to the sweep to tell the two constants apart, and why are they expensive?
#
# **Expected result**: $\tau \approx (\Omega p_{\rm crit}/p)\,(1 + p_{\rm crit}/(2p))$; the
# full curve is 12 % above the first-order one at $p = 101$ and 69 % at $p = 31$; moduli just
# above $p_{\rm crit}$.
# ```
#
# ````{solution} sweeps-ex-product
# :class: dropdown
#
# ```{include} ../solutions/grokking_sweeps.md
# :start-after: <!-- sweeps-ex-product -->
# :end-before: <!-- end sweeps-ex-product -->
# ```
# ````
#
# ```{exercise} Predict a delay, then train it
# :label: sweeps-ex-predict
#
# 🔴🔴⚪⚪⚪ · 🔵🔵🔵🔵⚪ · about 15 minutes, 4 of them waiting
#
# The recorded sweep fits the modulus law at $\omega = 1$ only; the theory says that at another
# weight decay the same curve holds with $\Omega$ divided by $\omega$. Test that: from the
# recorded fit (`recorded.fit_p`) and `corelib.theory.grok_time`, predict the mean delay at
# $p = 53$, $\omega = 3$, full batch. Then train that condition, three seeds, with the
# chapter's model (`corelib.tasks.sweeps.run_sweep`) in fp32, the chapter's precision. Training
# took 3.2 minutes on one core (CPU time measured with `/usr/bin/time` and
# `OMP_NUM_THREADS=1`).
#
# **Expected result**: a prediction of about 527 steps; the three seeds' delays are 563–575
# steps (mean 571), 8 % above it.
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# `recorded.fit_p["estimate"]` holds `Omega` and `p_crit`. The modulus sweep's condition is
# `corelib.tasks.sweeps.Condition(p=53, weight_decay=3.0, batch_size=None)`, and
# `dataclasses.replace(params, precision="fp32").config(params.p_max_epochs)` its settings;
# `run_sweep([condition], params.seeds, settings)` returns one row per seed with its `delay`.
# ```
#
# ````{solution} sweeps-ex-predict
# :class: dropdown
#
# ```{include} ../solutions/grokking_sweeps.md
# :start-after: <!-- sweeps-ex-predict -->
# :end-before: <!-- end sweeps-ex-predict -->
# ```
# ````
#
# ```{exercise} Stop at the first error too many
# :label: sweeps-ex-early-exit
#
# 🔴🔴⚪⚪⚪ · 🔵🔵⚪⚪⚪ · about 15 minutes
#
# The accuracy check of {ref}`sweeps-computes` decides "accuracy at least `threshold`" without
# always reading every answer. Write `early_exit(correct, threshold)`. Its input is one model's
# answers, a boolean array (`True`: right), in the order the check visits them. Return
# `(passed, n_checked)`: whether the accuracy $(n - \text{errors})/n$ on all of them is at
# least `threshold`, and how many answers you read. Stop at the first answer that makes the
# errors exceed what the threshold allows; a model that passes is read to the end. How many
# answers does the check read for a model at chance, and for one close to the threshold?
#
# **Expected result**: the check prints "all 14 cases pass". On `ex.example_answers()`, one
# seed's answers on the 1404 training pairs at $p = 53$ at three moments, the check stops after
# 17 answers at chance and after 1145 just short of memorising (both fail). Once memorised, the
# seed passes after all 1404. So the check is cheap while a model is far from the threshold,
# and costs a full pass only close to it.
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# The threshold allows the largest number of errors $e$ with $(n - e)/n \ge$ `threshold`;
# compute it with that comparison itself. `np.cumsum(~correct)` counts the errors so far.
# ```

# %%
def early_exit(correct, threshold=0.99):
    """(passed, n_checked): accuracy >= threshold? and answers read."""
    raise NotImplementedError  # your code here


ex.check_early_exit(early_exit);

# %% [markdown]
# ````{solution} sweeps-ex-early-exit
# :class: dropdown
#
# ```{include} ../solutions/grokking_sweeps.md
# :start-after: <!-- sweeps-ex-early-exit -->
# :end-before: <!-- end sweeps-ex-early-exit -->
# ```
# ````
