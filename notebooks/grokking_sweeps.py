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
# # Grokking sweeps: how the delay scales with weight decay and modulus
#
# The previous chapter derived a model of the grokking delay, the number of optimizer steps
# between memorising the training pairs and generalising to the held-out ones:
# $\tau \propto 1/\omega$ at a fixed modulus, and
# $\tau(p) = -\Omega \log(1 - p_{\rm crit}/p)$ at a fixed weight decay $\omega$. Here we measure
# the delay on trained transformers and fit both laws, reproducing the paper's Figure 4:
#
# 1. **weight-decay sweep**: delay versus $\omega$ at a fixed $p$ (minibatches), with a power law
#    $\tau = C\omega^\beta$ fitted in log--log space (the paper finds $\beta \approx -1.02$);
# 2. **modulus sweep**: delay versus $p$ at a fixed $\omega$ (full batch), with the ODE solution
#    fitted by non-linear least squares (the paper finds $\Omega \approx 2770$ steps and
#    $p_{\rm crit} \approx 23$).
#
# Every condition is trained with several seeds; the uncertainties of the fitted constants come
# from a bootstrap over seeds. The parameters below are the book's reduced sweep (see
# {ref}`sweeps-settings`); the `paper` profile runs the paper's (12 seeds, six weight decays,
# seven moduli, up to 30 000 epochs: many CPU hours), and its recorded run is shown below.
# Rerun with your own settings, e.g.
# `python -m acebook.runner run grokking_sweeps -p omegas "[0.5, 1, 2, 3]" -p n_seeds 4`.
#
# {glue:text}`cost`

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
precision = "bf16"  # training passes in bfloat16 (paper: "fp32")
n_boot = 1000  # bootstrap replicates for the fitted constants' spread
# None follows joblib's configuration (1 process unless configured)
n_jobs = None  # joblib processes for the conditions

# %% tags=["hide-input"]
from myst_nb import glue

from acebook.run_times import cost_sentence

glue("cost", cost_sentence("grokking_sweeps"), display=False)

# %%
import matplotlib.pyplot as plt
from IPython.display import display
from myst_nb import glue

from acebook.claims_page import chapter_frame
from corelib import claims, plots
from corelib.experiments import grokking_sweeps, paper_scale

params = grokking_sweeps.SweepsParams.from_namespace(globals())
plots.use_book_style()

# %% [markdown]
# ## Measuring the two times exactly
#
# Every model is a single post-norm transformer block (width {glue:text}`d_model`, MLP
# {glue:text}`d_ff`) trained with AdamW (learning rate {glue:text}`lr`; dropout
# {glue:text}`dropout_text`) on half of the $p^2$ pairs
# $(a, b)$, scored on $(a + b) \bmod p$ at the last position. For each seed,
#
# - $\tau_{\rm mem}$ is the first optimizer step after which the accuracy on the **whole**
#   training set is at least {glue:text}`threshold_pct` %,
# - $\tau_{\rm gen}$ the same on the whole test set, and $\tau_{\rm grok} = \tau_{\rm gen} -
#   \tau_{\rm mem}$.
#
# The accuracy is checked after **every** step, so the times carry no rounding from an
# evaluation interval. That sounds expensive, two passes over the data per step, but most checks
# can be decided after a few dozen examples: the threshold allows only a fixed number of errors
# (for $p =$ {glue:text}`omega_p`, {glue:text}`budget_53` of the {glue:text}`n_train_53` training
# pairs), so `corelib.sweeps` visits the examples in a fixed random order and stops as soon as a
# model has made one error too many. A model that passes is checked on every example, so the
# answer is exact either way. Seeds that have memorised skip the training check, seeds that have
# generalised the test check, and with full batches and no dropout the training step's own
# forward pass already is the training-set check of the previous step's weights. All seeds of a
# condition train together as one vectorised model (`corelib.engine`), each with its own
# initialisation, data order, dropout stream and optimizer state; a seed stops
# {glue:text}`patience` epochs after it generalised (or at the cap) and leaves the stack. A test
# (`tests/test_sweeps.py`) checks that the steps found are those of a naive full evaluation
# after every step.
#
# Each (condition, seed) result is stored as soon as the seed stops, so an interrupted sweep
# resumes with the missing seeds and a finished one is read from disk. Conditions are independent
# jobs run through [joblib](https://joblib.readthedocs.io): with a Dask (or Ray) cluster the same
# call runs on it,
#
# ```python
# with joblib.parallel_config(backend="dask", n_jobs=-1):
#     table = run_sweep(conditions, seeds, cfg)
# ```
#
# (after creating a `dask.distributed.Client`; workers need the project installed and a shared
# results folder).

# %%
summary = grokking_sweeps.run(params)
display(summary["summary_omega"].round(1))
display(summary["summary_p"].round(1))

# %% [markdown]
# The tables list, per condition, how many seeds have a delay (`n_grokked`: memorised and
# generalised before the cap, generalising after memorising), how many never did both
# (`n_missing`) and how many generalised no later than they memorised (`n_nonpositive`), and the
# mean times of the `n_grokked` seeds in optimizer steps. As in the reference code, only the
# `n_grokked` seeds enter the means and the fits.

# %%
claims.record(  # for the claims page
    "grokking_sweeps", grokking_sweeps.claim_values(summary),
    settings=grokking_sweeps.claim_settings(params))
print(grokking_sweeps.constants_table(summary).to_string(index=False))

# %% tags=["hide-input"]
fig = plots.figure_sweeps(summary)
glue("fig_sweeps", fig, display=False)
plt.close(fig)

# %% [markdown]
# ## Figure 4
#
# ```{glue:figure} fig_sweeps
# :name: fig-sweeps
#
# Grokking delay $\tau_{\rm grok} = \tau_{\rm gen} - \tau_{\rm mem}$ in optimizer steps, for
# each seed (grey) and as mean ± sd over seeds (black). Left: weight decays
# {glue:text}`omegas_text` at $p =$ {glue:text}`omega_p` ({glue:text}`omega_batch_text`), with
# the least-squares power law in log--log space. Right: moduli {glue:text}`moduli_text` at
# $\omega =$ {glue:text}`p_omega` ({glue:text}`p_batch_text`), with the fitted ODE solution
# $\tau(p) = -\Omega\log(1 - p_{\rm crit}/p)$ and the paper's fitted curve, its $\Omega$ divided
# by $\omega$ as the theory predicts.
# ```
#
# ```{glue:figure} constants_table
# :name: tab-sweep-constants
#
# Fitted constants. As in the paper, both fits see one point per condition, the mean delay of
# its grokked seeds (a power law by ordinary least squares on $\log\bar\tau$ versus
# $\log\omega$, the ODE solution by `scipy.optimize.curve_fit`); the seeds enter through the
# uncertainties: the standard deviation and the 2.5--97.5 % percentiles over {glue:text}`n_boot`
# bootstrap replicates that resample the seeds of every condition and refit their means.
# ```
#
# Of the {glue:text}`n_runs` runs, {glue:text}`n_grokked` memorised and then generalised before
# the cap. **Weight decay.** The mean delay goes from {glue:text}`w_first_delay` steps at
# $\omega =$ {glue:text}`w_first` to {glue:text}`w_last_delay` at $\omega =$ {glue:text}`w_last`;
# the power law has exponent
# $\beta =$ {glue:text}`beta` ± {glue:text}`beta_sd` ($R^2 =$ {glue:text}`r2_omega`); the paper
# reports {glue:text}`paper_omega_exponent` and the theory predicts $-1$: weight decay sets the
# time scale $\Omega \propto 1/\omega$ of the margin's relaxation. **Modulus.** The mean delay goes
# from {glue:text}`p_first_delay` steps at $p =$ {glue:text}`p_first` to {glue:text}`p_last_delay`
# at $p =$ {glue:text}`p_last`. The theory explains a falling delay: more equivalent Fourier modes
# share the work of building the margin, and the delay grows without bound as $p$ approaches
# $p_{\rm crit}$. The ODE solution fits the delays with $\Omega =$ {glue:text}`Omega` ± {glue:text}`Omega_sd` steps and
# $p_{\rm crit} =$ {glue:text}`p_crit` ± {glue:text}`p_crit_sd` ($R^2 =$ {glue:text}`r2_p`).
# Rescaled to $\omega = 1$ with $\Omega \propto 1/\omega$, the optimizer constant is
# {glue:text}`Omega_at_1` steps, against the paper's {glue:text}`paper_Omega` (and
# $p_{\rm crit}$ {glue:text}`paper_p_crit`). Far from $p_{\rm crit}$ the delays constrain mainly
# the product $\Omega p_{\rm crit}$ (the $1/p$ asymptote), so the two constants are correlated:
# their relative bootstrap sd are {glue:text}`rel_Omega` % and {glue:text}`rel_p_crit` %, that of
# the product {glue:text}`rel_product` %.
#
# (sweeps-settings)=
# ## Settings of this build
#
# The paper's sweeps train 12 seeds for each of six weight decays and seven moduli, up to
# 30 000 epochs: hours on a GPU, far more on a laptop CPU. The `book` profile
# (`profiles.yml`) keeps the method and the model but trains fewer seeds and conditions, and runs
# the modulus sweep at a larger weight decay, where the same laws predict delays a few times
# shorter; the rescaled $\Omega$ above makes the result comparable with the paper's. This build
# used {glue:text}`n_seeds` seeds per condition, weight decays {glue:text}`omegas_text`, moduli
# {glue:text}`moduli_text` at $\omega =$ {glue:text}`p_omega`, at most {glue:text}`omega_cap` and
# {glue:text}`p_cap` epochs per condition, and stopped each seed {glue:text}`patience` epochs after
# it generalised. `python -m acebook.runner run grokking_sweeps --profile paper` runs the paper's
# settings (it resumes where it stops, so it can be run in pieces). Minibatches follow the
# reference code: each seed draws a fresh permutation of the training pairs whenever the next
# batch would run past its end, so with {glue:text}`omega_batch_text` at
# $p =$ {glue:text}`omega_p` a permutation gives {glue:text}`steps_per_permutation` step(s) and
# skips its last {glue:text}`skipped` pairs, while caps and patience count epochs of
# {glue:text}`steps_per_epoch` step(s).
#
# ## At the paper's scale: the recorded sweeps
#
# The `paper` profile's sweeps take many CPU hours, so they were run once and their per-seed
# records are kept in the repository (`recorded/`, read by `corelib.experiments.paper_scale`),
# summarised and fitted here exactly as this build's own. {glue:text}`rec_status`

# %%
recorded = paper_scale.recorded_sweeps()
paper_scale.record_claims("grokking_sweeps", recorded)

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
# **The recorded paper-scale sweeps**, drawn as {numref}`fig-sweeps`.
# ```
#
# At the paper's scale, {glue:text}`rec_n_grokked` of {glue:text}`rec_n_runs` runs memorised and
# then generalised before the cap. The power law in $\omega$ has exponent
# $\beta =$ {glue:text}`rec_beta` ± {glue:text}`rec_beta_sd` ($R^2 =$
# {glue:text}`rec_r2_omega`; the paper: {glue:text}`paper_omega_exponent`), and the ODE solution
# fits $p_{\rm crit} =$ {glue:text}`rec_p_crit` ± {glue:text}`rec_p_crit_sd` with
# $\Omega =$ {glue:text}`rec_Omega_at_1` steps at $\omega = 1$ ($R^2 =$ {glue:text}`rec_r2_p`;
# the paper: {glue:text}`paper_p_crit` and {glue:text}`paper_Omega`).
#
# ## The paper's claims
#
# This chapter's rows of the [claims page](claims.ipynb). Where a recorded paper-scale sweep
# exists, the claims are judged on it, and the column "this build" gives what this build
# measured; a sweep with fewer seeds or conditions than the paper's alone is "measured at reduced
# settings", whatever its numbers.

# %%
display(chapter_frame("grokking_sweeps"))

# %% [markdown]
# ## Exercises
#
# ```{exercise}
# :label: sweeps-ex-budget
#
# For $p = 53$ the training set has 1 404 pairs and the test set 1 405. How many errors does the
# 99 % threshold allow on each? A model still at chance level ($1/53$) is being checked with a
# first chunk of 60 examples: how likely is it that the check needs a second chunk?
# ```
#
# ````{solution} sweeps-ex-budget
# :class: dropdown
#
# $0.99 \cdot 1404 = 1389.96$, so 1 390 correct answers are needed and 14 errors are allowed;
# $0.99 \cdot 1405 = 1390.95$ gives 1 391 and again 14 errors (`corelib.sweeps.min_correct`). At
# chance a model gets each example right with probability $1/53$, so among 60 examples it makes
# more than 14 errors unless at least 46 are right, which has a probability below $10^{-60}$:
# one chunk always decides.
#
# ```python
# from scipy.stats import binom
# from corelib.sweeps import min_correct
#
# budgets = [n - min_correct(n, 0.99) for n in (1404, 1405)]  # [14, 14]
# p_second_chunk = binom.sf(60 - 14 - 1, 60, 1 / 53)  # P(at least 46 right out of 60)
# ```
#
# The expensive checks are those of models close to the threshold,
# i.e. in the few steps around $\tau_{\rm mem}$ and $\tau_{\rm gen}$.
# ````
#
# ```{exercise}
# :label: sweeps-ex-offbyone
#
# Without dropout (`dropout = 0`), the forward pass of step $t$ in full-batch training sees every
# training example, and `corelib.sweeps.train_condition` reads the training accuracy from it
# instead of evaluating it again. (With dropout, the default, that forward pass is a noisy
# model's, so the engine evaluates the training set instead.) Whose training accuracy does that
# forward pass give: that of the weights before or after update $t$? Why must a seed that is about
# to stop get one explicit training-set check, and what would go wrong if the forward pass's
# accuracy were recorded as "after step $t$"?
# ```
#
# ````{solution} sweeps-ex-offbyone
# :class: dropdown
#
# The forward pass of step $t$ runs before the update, on the weights after step $t-1$; so it
# tells whether the model was memorised *after step $t-1$*, and $\tau_{\rm mem} = t-1$ if this is
# the first time. The weights after the last step a seed takes are never seen by a later forward
# pass, hence the explicit check when it stops. Recording the accuracy as "after step $t$" would
# make every $\tau_{\rm mem}$ one step too late and every delay one step too short;
# `tests/test_sweeps.py` compares with a naive evaluation after every step and catches exactly
# this.
# ````
#
# ```{exercise}
# :label: sweeps-ex-powerlaw
#
# Fit a plain power law $\tau = C p^{\beta}$ to the modulus sweep with
# `corelib.theory.fit_power_law` and compare its exponent with $-1$, the large-$p$ limit of the
# ODE solution. Why is it steeper?
# ```
#
# ````{solution} sweeps-ex-powerlaw
# :class: dropdown
#
# ```python
# from corelib.theory import fit_power_law
#
# ok = summary["table_p"].dropna(subset=["delay"])
# fit = fit_power_law(ok["p"], ok["delay"])
# print(f"exponent {fit.exponent:.2f} ± {fit.exponent_se:.2f}, R^2 {fit.r2:.3f}")
# ```
#
# The exponent comes out clearly below $-1$ (the paper's constants give about $-1.5$ over its
# primes, see the previous chapter's exercise). $-\log(1 - x) = x + x^2/2 + \dots$ with
# $x = p_{\rm crit}/p$ only approaches $x$, i.e. $\tau \propto 1/p$, when $p \gg p_{\rm crit}$;
# at $p$ a few times $p_{\rm crit}$ the higher terms make the delay fall faster than $1/p$.
# ````
