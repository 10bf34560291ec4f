# ---
# jupyter:
#   corelib_stores_results: false
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # How ACE works: activity, relevance and balanced truncation
#
# ```{admonition} In this chapter
# :class: tip
#
# **You will be able to**
# - compute an ACE core from two $D \times D$ moment matrices, activity and relevance, and choose
#   its rank with an energy threshold;
# - explain why ACE applied to a linear system *is* balanced truncation, and test it against an
#   independent implementation to rounding error;
# - predict how fast a core extracted from sampled activations approaches the exact one;
# - tell apart the directions a layer *uses* from the directions it merely *varies along*, with a
#   case where PCA ranks the one direction that matters last.
#
# **Before you start**: this is the first chapter; {doc}`../rerun` shows how to run it. The
# mathematics: the singular value decomposition, eigendecompositions of symmetric matrices,
# covariance matrices and Jacobians. Linear time-invariant systems are introduced where they are
# needed.
#
# **Time**: about {glue:text}`time_read` minutes to read, {glue:text}`time_total` with the exercises.
#
# **Computing it** on {glue:text}`cost_machine`: {glue:text}`cost_book` with the book's
# settings, {glue:text}`cost_paper` with the paper's (`--profile paper`).
# ```
#
# {term}`Algorithmic Core Extraction` (ACE) looks for the few directions of a layer's activation space
# that carry a computation. A direction qualifies when it is **active**, because the activations
# actually move along it, and **relevant**, because the output of interest actually responds to
# it. Neither property is enough alone: a direction with huge variance that the read-out ignores
# is noise as far as the task is concerned, and a direction the read-out is very sensitive to but
# that never varies carries no information.
#
# This chapter builds ACE from these two ingredients and tests it where the answer is known in
# closed form. We will see three things:
#
# 1. on a **linear dynamical system**, {term}`activity` and {term}`relevance` are the two Gramians
#    of control theory, and ACE returns the Hankel singular values and the subspace kept by balanced
#    truncation, the standard method of model reduction, to rounding error;
# 2. computed from **simulated data** instead of the exact moments, the same {term}`core` is found,
#    with the error of a sample covariance: it shrinks like $N^{-1/2}$ in the number of samples;
# 3. on a small example in which the read-out listens to the quietest direction, **ACE and PCA
#    disagree**, and PCA is wrong about what matters.
#
# The paper has no linear-system experiment: this chapter is the book's test of the method before
# the following chapters apply it to transformers. The parameters below size the random system,
# the simulations and the ACE-versus-PCA example; change them with, e.g.,
# `ace-book run ace_method -p n_states 20 -p rank 6`.

# %% tags=["parameters"]
# Linear system (sections 2-3)
n_states = 12  # state dimension n of the LTI system
n_inputs = 2  # number of inputs m
n_outputs = 2  # number of outputs l
spectral_radius = 0.9  # largest |eigenvalue| of A (< 1: stable)
rank = 4  # core / balanced-truncation rank r
seed = 0  # seed of the random system and of the simulations
sim_steps = [1000, 10000, 100000]  # lengths of simulated trajectories
sim_repeats = 8  # trajectories per length (errors are averaged)
n_jacobian_samples = 16  # Jacobians sampled for the extraction from data
# ACE versus PCA (section 4)
pca_dim = 6  # activation dimension D of the synthetic example
pca_samples = 4000  # number of synthetic activations N
pca_signal_std = 0.3  # spread along the direction the read-out uses
pca_nuisance_std = 3.0  # spread along the direction the read-out ignores
pca_decorrelate = True  # components exactly uncorrelated in the sample

# %% tags=["hide-input"]
from myst_nb import glue

from acebook.readability import chapter_time
from acebook.run_times import chapter_cost

cost = chapter_cost("ace_method")
glue("cost_machine", cost.machine, display=False)
glue("cost_book", cost.book, display=False)
glue("cost_paper", cost.paper, display=False)
minutes = chapter_time("ace_method")
glue("time_read", minutes.reading, display=False)
glue("time_total", minutes.total, display=False)

# %%
import matplotlib.pyplot as plt
from myst_nb import glue

from corelib import plots
from corelib.experiments import ace_method

params = ace_method.AceMethodParams.from_namespace(globals())
plots.use_book_style()

# %% [markdown]
# ## What ACE computes
#
# Fix a layer of width $D$ and collect its activations $\mathbf{h}_1, \dots, \mathbf{h}_N \in
# \mathbb{R}^D$ on $N$ inputs. Let $f : \mathbb{R}^D \to \mathbb{R}^K$ map the layer to $K$
# task-relevant outputs (logits, a logit difference, a prediction of the future), and let
# $\mathbf{J}_i = \partial f / \partial \mathbf{h}\,(\mathbf{h}_i) \in \mathbb{R}^{K \times D}$ be
# its Jacobian at sampled activations. ACE summarises the two properties by two $D \times D$
# moment matrices:
#
# $$
# \mathbf{A} = \frac{1}{N-1} \sum_{i=1}^{N} (\mathbf{h}_i - \bar{\mathbf{h}})(\mathbf{h}_i - \bar{\mathbf{h}})^\top
# \quad \text{(activity)}, \qquad
# \mathbf{S} = \frac{1}{M} \sum_{i=1}^{M} \mathbf{J}_i^\top \mathbf{J}_i
# \quad \text{(relevance)}.
# $$
#
# For a unit vector $\mathbf{q}$, $\mathbf{q}^\top \mathbf{A}\, \mathbf{q}$ is the variance of the
# activations along $\mathbf{q}$ and $\mathbf{q}^\top \mathbf{S}\, \mathbf{q}$ is the mean squared
# change of the output per unit step along $\mathbf{q}$. The paper defines the core through the
# SVD of the $N \times NK$ interaction matrix $\mathbf{H}\mathbf{J}^\top$ between centred
# activations and stacked Jacobians. That matrix is enormous, but only its singular values and
# left singular vectors matter, and both are available from $D \times D$ square-root factors:
#
# $$
# \mathbf{A} + \varepsilon \mathbf{I} = \mathbf{L}\mathbf{L}^\top, \qquad
# \mathbf{S} = \boldsymbol{\Gamma}\boldsymbol{\Gamma}^\top, \qquad
# \mathbf{L}^\top \boldsymbol{\Gamma} = \mathbf{U} \boldsymbol{\Sigma} \mathbf{V}^\top, \qquad
# \mathcal{C} = \operatorname{span}(\mathbf{L}\mathbf{U}_r).
# $$
#
# The singular values $\sigma_1 \ge \sigma_2 \ge \dots$ rank directions by *joint* activity and
# relevance, and the {term}`rank <energy rank>` $r$ is the smallest one whose leading squared
# singular values hold a chosen share of the energy,
# $\sum_{i \le r} \sigma_i^2 \big/ \sum_i \sigma_i^2 \ge \tau$.
# {ref}`ace-ex-dxd` derives the equivalence with the paper's route; {ref}`ace-ex-energy` and
# {ref}`ace-ex-core` ask you to write the rank rule and the extraction yourself.

# %% [markdown]
# ## ACE on a linear system is balanced truncation
#
# On a linear system, ACE is balanced truncation: it returns the Hankel singular values and the
# subspace that balanced truncation keeps, to rounding error. This section says why one should
# expect it, then tests it on a random system.
#
# Consider the discrete-time linear time-invariant system
#
# $$
# \mathbf{x}_{t+1} = \mathbf{A}_{\rm sys} \mathbf{x}_t + \mathbf{B}\mathbf{u}_t, \qquad
# \mathbf{y}_t = \mathbf{C}\mathbf{x}_t,
# $$
#
# with $n$ states, $m$ inputs, $\ell$ outputs and a stable $\mathbf{A}_{\rm sys}$ (all eigenvalues
# inside the unit circle). Its two classical Gramians are exactly ACE's two moments for the
# state $\mathbf{x}_t$:
#
# * **Activity.** Drive the system with white noise $\mathbf{u}_t$ of unit variance. The
#   stationary covariance of the state is the *reachability Gramian*
#   $\mathbf{W}_c = \sum_{k \ge 0} \mathbf{A}_{\rm sys}^k \mathbf{B}\mathbf{B}^\top
#   (\mathbf{A}_{\rm sys}^\top)^k$, the solution of
#   $\mathbf{A}_{\rm sys}\mathbf{W}_c\mathbf{A}_{\rm sys}^\top - \mathbf{W}_c + \mathbf{B}\mathbf{B}^\top = 0$.
# * **Relevance.** Take as read-out all future outputs, $f(\mathbf{x}_t) = (\mathbf{y}_t,
#   \mathbf{y}_{t+1}, \dots)$ with no further input. Its Jacobian is the observability matrix
#   $\mathbf{O} = [\mathbf{C}; \mathbf{C}\mathbf{A}_{\rm sys}; \mathbf{C}\mathbf{A}_{\rm sys}^2; \dots]$,
#   the same at every state, and $\mathbf{O}^\top\mathbf{O}$ is the *observability Gramian*
#   $\mathbf{W}_o$, the solution of
#   $\mathbf{A}_{\rm sys}^\top\mathbf{W}_o\mathbf{A}_{\rm sys} - \mathbf{W}_o + \mathbf{C}^\top\mathbf{C} = 0$.
#
# Balanced truncation, the standard method of model reduction, changes state coordinates so that
# both Gramians become the same diagonal matrix $\operatorname{diag}(\sigma_1, \dots, \sigma_n)$ of
# *Hankel singular values* and keeps the $r$ states with the largest ones. So ACE with
# activity $\mathbf{W}_c$ and relevance $\mathbf{W}_o$ should reproduce the Hankel singular values
# and the balanced-truncation subspace. We test it on a random stable system.

# %%
lti = ace_method.lti_comparison(params)
print(f"max relative error of the singular values: "
      f"{lti.hankel_rel_err:.2e}")
print(f"largest principal angle, scipy / corelib:  "
      f"{lti.angle_scipy:.2e} / {lti.angle_corelib:.2e} rad")

# %% tags=["hide-input"]
fig = plots.figure_spectra(lti, tolerance=ace_method.HANKEL_REL_TOL)
glue("fig_spectra", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_spectra
# :name: fig-ace-hankel
#
# Left: the Hankel singular values of the random system (circles) and the ACE singular values
# computed from its Gramians (crosses); the shaded band is the rank-$r$ core. Right: their
# relative difference for every index. It grows towards the small singular values, because a
# perturbation of size $\epsilon_{\rm mach}\sigma_1$ is a larger fraction of a smaller $\sigma_i$,
# but stays far below the acceptance threshold (dashed).
# ```
#
# The random system has {glue:text}`n_states` states, {glue:text}`n_inputs` inputs,
# {glue:text}`n_outputs` outputs and spectral radius {glue:text}`spectral_radius:.2f`.
#
# The ACE singular values agree with the Hankel singular values to a relative error of at most
# {glue:text}`hankel_rel_err:.1e`. The rank-{glue:text}`rank` core and the balanced-truncation
# subspace are the same subspace: their largest {term}`principal angle <principal angles>` is
# {glue:text}`angle_scipy:.1e` rad. An energy threshold of {glue:text}`energy:.0%` would keep
# {glue:text}`lti_energy_rank` states of this system.
#
# ```{admonition} Details: two independent computations, and the book's tolerances
# :class: dropdown
#
# The two computations share only the Gramians: the reference uses Cholesky factors, ACE uses
# symmetric `eigh` factors. The largest principal angle is {glue:text}`angle_scipy:.1e` rad
# according to `scipy.linalg.subspace_angles` and {glue:text}`angle_corelib:.1e` rad according to
# `corelib.compare.principal_angles`. The book's tests accept a relative error of at most
# {glue:text}`hankel_rel_tol:.0e` and an angle of at most {glue:text}`angle_tol_rad:.0e` rad.
# ```
#
# **Why they agree.** With $\mathbf{L}\mathbf{L}^\top = \mathbf{W}_c$ and
# $\boldsymbol{\Gamma}\boldsymbol{\Gamma}^\top = \mathbf{W}_o$, the squared singular values of
# $\mathbf{L}^\top\boldsymbol{\Gamma}$ are the eigenvalues of
#
# $$
# (\mathbf{L}^\top\boldsymbol{\Gamma})(\mathbf{L}^\top\boldsymbol{\Gamma})^\top
# = \mathbf{L}^\top \mathbf{W}_o \mathbf{L},
# $$
#
# and $\mathbf{L}^\top\mathbf{W}_o\mathbf{L}$ has the same eigenvalues as
# $\mathbf{W}_o\mathbf{L}\mathbf{L}^\top = \mathbf{W}_o\mathbf{W}_c$ (the products $\mathbf{X}\mathbf{Y}$
# and $\mathbf{Y}\mathbf{X}$ share their non-zero eigenvalues), hence as $\mathbf{W}_c\mathbf{W}_o$.
# The Hankel singular values are, by definition, $\sigma_i = \sqrt{\lambda_i(\mathbf{W}_c\mathbf{W}_o)}$.
# The subspaces agree too: with $\mathbf{L}^\top\boldsymbol{\Gamma} = \mathbf{U}\boldsymbol{\Sigma}\mathbf{V}^\top$,
# the matrix $\mathbf{T}^{-1} = \mathbf{L}\mathbf{U}\boldsymbol{\Sigma}^{-1/2}$ balances the system
# ($\mathbf{T}\mathbf{W}_c\mathbf{T}^\top = \mathbf{T}^{-\top}\mathbf{W}_o\mathbf{T}^{-1} = \boldsymbol{\Sigma}$),
# so the first $r$ balanced states span exactly $\operatorname{span}(\mathbf{L}\mathbf{U}_r)$, the
# ACE core; and this span does not depend on which square-root factor $\mathbf{L}$ one picks.
#
# Computing $\sqrt{\lambda(\mathbf{W}_c\mathbf{W}_o)}$ directly is a third route, but a worse one:
# the product of the two Gramians is not symmetric and squares their conditioning.

# %%
print("max relative error against Hankel:")
print(f"  sqrt(eig(Wc Wo)):   {lti.eig_route_rel_err:.2e}")
print(f"  ACE's square root:  {lti.hankel_rel_err:.2e}")

# %% [markdown]
# On this system the eigenvalue route is off by up to {glue:text}`eig_route_rel_err:.1e`
# (relative), against {glue:text}`hankel_rel_err:.1e` between the two square-root routes.
#
# The spread of the spectrum, $\sigma_1 / \sigma_n =$ {glue:text}`hsv_ratio:.1e`, sets how much
# relative accuracy the smallest values can have at all. In a system that is nearly non-minimal,
# some state is almost unreachable or unobservable. Its trailing singular values are tiny, and no
# method can keep their relative error at machine precision.

# %% [markdown]
# ## The same core from data
#
# From simulated activations, ACE finds the same core as from the exact moments. Its error is
# that of a sample covariance, and it shrinks roughly like $N^{-1/2}$ in the number of samples.
#
# The Gramians are population moments. ACE in a network never sees them: it sees activations and
# Jacobians. To connect the two, we simulate the system driven by white noise and collect the
# states $\mathbf{x}_t$ as "activations". Then we differentiate the read-out "next $H$ outputs"
# with `corelib.ace.jacobians`, with a horizon $H$ long enough that the neglected tail of
# $\mathbf{O}^\top\mathbf{O}$ is negligible. The read-out is linear, so every Jacobian is the
# same matrix $\mathbf{O}$ and the relevance moment is exact. All the sampling error is in the
# activity moment.

# %%
simulation = ace_method.from_simulation(lti)
print(f"horizon H = {simulation.horizon}, relative tail of the "
      f"observability Gramian {simulation.horizon_tail:.1e}")
print(f"RMS over {sim_repeats} runs, top-{rank} singular values:")
errors_angles = zip(simulation.errors, simulation.angles)
for n_steps, (err, angle) in zip(sim_steps, errors_angles):
    print(f"N = {n_steps:>7}: relative error {err:.2e}, "
          f"largest angle to balanced truncation {angle:.2f} deg")

# %% tags=["hide-input"]
fig = plots.figure_from_data(simulation)
glue("fig_from_data", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_from_data
# :name: fig-ace-from-data
#
# ACE computed from a simulated trajectory approaches the Hankel singular values as the
# trajectory grows. The error shrinks, though not at a steady rate over the lengths simulated
# (the trajectory is correlated in time, so the effective sample size is smaller than $N$).
# ```
#
# From {glue:text}`sim_n_min` simulated steps, the leading ACE singular values are within
# {glue:text}`data_err_min_n:.1e` of the Hankel values (relative error). From
# {glue:text}`sim_n_max` steps they are within {glue:text}`data_err_max_n:.1e`, and the
# data-driven core is within {glue:text}`data_angle_max_n:.1f` degrees of the
# balanced-truncation subspace.
#
# ```{admonition} Details: the horizon and the averaging
# :class: dropdown
#
# With a horizon of $H =$ {glue:text}`horizon` steps the truncated $\mathbf{O}^\top\mathbf{O}$
# differs from $\mathbf{W}_o$ by {glue:text}`horizon_tail:.0e` (relative), and
# {glue:text}`n_jacobian_samples` Jacobian samples suffice. Every error is a root mean square over
# {glue:text}`sim_repeats` independent runs, for the leading {glue:text}`rank` singular values.
# ```

# %% [markdown]
# ## When ACE and PCA disagree
#
# When the read-out listens only to the quietest direction, PCA ranks that direction last and
# ACE ranks it first. PCA ranks directions by activity alone. When the direction a computation uses is not the one
# with the most variance, PCA and ACE part ways. Here is the smallest example: $D$-dimensional
# activations with independent components of decreasing spread along random orthogonal axes
# $\mathbf{e}_1, \dots, \mathbf{e}_D$, from a large spread along $\mathbf{e}_1$ down to a small
# one along $\mathbf{e}_D$. The read-out looks only at the quietest axis,
#
# $$
# f(\mathbf{h}) = \tanh\!\big(\mathbf{e}_D^\top (\mathbf{h} - \bar{\mathbf{h}}) / s\big),
# $$
#
# where $s$ is the spread along $\mathbf{e}_D$. Its Jacobians all point along $\mathbf{e}_D$, so
# the relevance moment has rank one. For a rank-one relevance
# $\mathbf{S} = c\,\mathbf{w}\mathbf{w}^\top$ the ACE core is $\operatorname{span}(\mathbf{A}\mathbf{w})$:
# the read-out direction weighted by activity, i.e. the covariance of every coordinate with the
# read-out. That is $\mathbf{e}_D$ itself when $\mathbf{e}_D$ is a principal axis of the *sample*
# covariance. So we draw the components and then make them exactly uncorrelated in the sample
# (parameter `pca_decorrelate`); {ref}`ace-ex-tilt` shows what sampling noise does without that
# step.

# %%
decoy = ace_method.decoy_comparison(params)
print(f"ACE energy rank: {decoy.ace_rank}")
print("angle to the read-out direction: "
      f"ACE {decoy.angle_ace:.2f} deg, "
      f"PCA {decoy.angle_pca:.2f} deg")

# %% [markdown]
# To see what each subspace is worth, we {term}`keep` only the top-$k$ directions. The centred
# core-only {term}`intervention` is
# $\tilde{\mathbf{h}} = \bar{\mathbf{h}} + \mathbf{P}_k(\mathbf{h} - \bar{\mathbf{h}})$
# (`Core.keep(h, centered=True)`; for PCA we wrap its basis in a `Core`). We score how much of
# the read-out survives by $R^2 = 1 - \sum_i (f(\mathbf{h}_i) - f(\tilde{\mathbf{h}}_i))^2 / \sum_i
# (f(\mathbf{h}_i) - \overline{f})^2$. {ref}`ace-ex-keep` asks you to write this score yourself.

# %%
print("R^2 of the read-out, keeping the top k directions of")
for k, ace, pca in zip(decoy.ks, decoy.r2_ace, decoy.r2_pca):
    print(f"k = {k}:  ACE {ace:6.3f}   PCA {pca:6.3f}")

# %% tags=["hide-input"]
fig = plots.figure_pca(decoy)
glue("fig_pca", fig, display=False)
plt.close(fig)

# %% tags=["hide-input"]
values = ace_method.glue_values(lti, simulation, decoy)
for name, value in values.items():
    glue(name, value, display=False)

# %% [markdown]
# ```{glue:figure} fig_pca
# :name: fig-ace-pca
#
# Left: synthetic activations projected on the loudest axis $\mathbf{e}_1$ and the quietest axis
# $\mathbf{e}_D$, coloured by the read-out (note the different scales of the two axes). The
# read-out changes only vertically; PCA's first direction points horizontally, ACE's vertically
# (arrows span {glue:text}`arrow_sd:.1f` standard deviations of the activations along each
# direction). Right: share of the read-out's variance kept
# when only the top-$k$ directions of each method survive.
# ```
#
# The example has {glue:text}`pca_samples` activations in $D =$ {glue:text}`pca_dim` dimensions,
# with a {glue:text}`spread_ratio:.0f`-fold spread between the loudest and the quietest axis.
#
# ACE's energy criterion picks a core of rank {glue:text}`ace_toy_rank`, within
# {glue:text}`angle_ace_w:.0e` degrees of the read-out direction. PCA's first direction is
# {glue:text}`angle_pca_w:.1f` degrees away from it.
#
# Keeping the one ACE direction preserves the read-out ($R^2 =$ {glue:text}`r2_ace_1:.3f`).
# Keeping the first PCA direction destroys it ($R^2 =$ {glue:text}`r2_pca_1:.3f`). PCA needs all
# {glue:text}`pca_k_needed` directions before the read-out survives, because the direction that
# matters is the one PCA ranks last.
#
# Real networks are rarely this adversarial, and the paper notes that ACE often agrees with PCA
# on simple tasks. The example shows why agreement cannot be assumed: variance says where the
# activations move, not whether anything downstream listens.

# %% [markdown]
# ## Summary
#
# - ACE reduces a layer to the directions that are both active (the activation covariance) and
#   relevant (the mean $\mathbf{J}^\top\mathbf{J}$ of a read-out). It takes the SVD of the
#   product of two $D \times D$ square-root factors. This is the paper's own shortcut for the SVD
#   of the $N \times NK$ matrix $\mathbf{H}\mathbf{J}^\top$, with the same singular values and
#   the same core ({ref}`ace-ex-dxd`).
# - What reproduces: the paper motivates ACE by saying that for a linear system it would reduce
#   to balanced truncation. On the chapter's random system it does, to rounding error. The
#   singular values are the Hankel singular values and the core is the balanced-truncation
#   subspace ({numref}`fig-ace-hankel`). The differences measured are orders of magnitude below
#   the tolerances of the book's tests. The algebra behind it is short and holds for any stable
#   system.
# - From sampled activations the singular values and the core approach the exact ones roughly
#   at the rate of a sample covariance, $N^{-1/2}$, over the lengths simulated, though not at a
#   steady rate ({numref}`fig-ace-from-data`). With samples correlated in time, the effective $N$
#   is smaller than the number of steps.
# - Variance alone can rank the one relevant direction last: in the example built for it, the
#   leading PCA direction keeps none of the read-out and ACE's single direction keeps all of it
#   ({numref}`fig-ace-pca`). The paper expects the two to agree on simple tasks; the example
#   shows why agreement has to be checked, not assumed.
#
# What differs: nothing the chapter measures; the paper has no linear-system experiment, so this
# is the book's own check of the method. Here every Jacobian is the same matrix, so the relevance
# moment is exact and all the sampling error sits in the activity. The same holds in the modular
# models, whose cores sit before a linear read-out: any number of Jacobians gives the same core
# there {claim}`modular.jacobians_exact <holds>`. What is open: how many Jacobians a core needs
# when the read-out passes through later, nonlinear layers, as in the language models.
#
# ## How this chapter computes
#
# Everything is recomputed at every run, in seconds; the chapter stores no results. The loops
# and the synthetic data live in `corelib.experiments.ace_method`.
#
# The exact side uses `corelib.linear`, written independently of `corelib.ace`. The Gramians come
# from `scipy.linalg.solve_discrete_lyapunov` and the Hankel singular values from Cholesky
# factors. ACE (`corelib.ace.from_moments`) factorises with `eigh` and, for these exact checks,
# no jitter ($\varepsilon = 0$).
#
# On a network, `MomentAccumulator` streams activations and Jacobians into $\mathbf{A}$ and
# $\mathbf{S}$ in float64, with memory independent of $N$. `extract` adds a jitter of
# {glue:text}`extract_eps:.0e` times the mean eigenvalue to both before factorising. The
# simulated errors are root mean squares over the repeated trajectories. The tolerances quoted
# above are those of `tests/test_chapter_checks.py`, which runs the same functions.

# %% [markdown]
# ## Exercises
#
# Difficulty 🔴 (of 🔴🔴🔴🔴🔴) and importance 🔵 (of 🔵🔵🔵🔵🔵) follow the conventions of the
# ARENA course. A coding exercise gives a stub; fill it in and run the check below it, which
# calls your function on the book's case, random cases and edge cases and says what is wrong.
#
# ```{exercise} The rank rule
# :label: ace-ex-energy
#
# 🔴⚪⚪⚪⚪ · 🔵🔵🔵⚪⚪ · about 10 minutes
#
# Write `energy_rank(singular_values, threshold)`: the smallest $r$ such that the $r$ leading
# squared singular values (given in descending order) hold at least `threshold` of the sum of
# all squares. Mind the edge cases: equal values, a threshold of exactly 1, zeros.
#
# **Expected result**: rank {glue:text}`lti_energy_rank` for the chapter's Hankel singular
# values at the threshold {glue:text}`energy:.2f`; the check prints "all 8 cases pass".
# ```
#
# ```{admonition} Hint 1
# :class: dropdown
#
# `np.cumsum` of the squares divided by their sum is the share held by the first $1, 2, \dots$
# values. Count how many shares are still below the threshold.
# ```
#
# ```{admonition} Hint 2
# :class: dropdown
#
# A cumulative sum of floating-point numbers can end at 0.9999999999999998 instead of 1; compare
# with a small tolerance.
# ```

# %%
from corelib.exercises import ace_method as ex


def energy_rank(singular_values, threshold):
    """Smallest r whose leading squared values hold `threshold`."""
    raise NotImplementedError  # your code here


ex.check_energy_rank(energy_rank);

# %% [markdown]
# ````{solution} ace-ex-energy
# :class: dropdown
#
# ```{include} ../solutions/ace_method.md
# :start-after: <!-- ace-ex-energy -->
# :end-before: <!-- end ace-ex-energy -->
# ```
# ````
#
# ```{exercise} ACE from two moment matrices
# :label: ace-ex-core
#
# 🔴🔴🔴⚪⚪ · 🔵🔵🔵🔵🔵 · about 25 minutes
#
# Write `ace_core(activity, relevance, r)`, returning the singular values of
# $\mathbf{L}^\top\boldsymbol{\Gamma}$ (descending) and a $D \times r$ basis of the rank-$r$
# core, from the two moments alone (no jitter). Some of the check's moments are singular, as
# they are in a network whose layer does not use every direction.
#
# **Expected result**: for the chapter's Gramians, the leading four singular values are the
# Hankel singular values 27.66, 8.948, 1.413 and 0.855; the check prints "all 5 cases pass" for
# the singular values, then for the basis.
# ```
#
# ```{admonition} Hint 1
# :class: dropdown
#
# For a symmetric positive semi-definite $\mathbf{M} = \mathbf{V}\,\mathrm{diag}(\mathbf{w})
# \mathbf{V}^\top$, the matrix $\mathbf{V}\,\mathrm{diag}(\sqrt{\mathbf{w}})$ is a square-root
# factor, and it exists where Cholesky fails. Round-off can make a zero eigenvalue slightly
# negative.
# ```
#
# ```{admonition} Hint 2
# :class: dropdown
#
# $\mathbf{U}_r$ lives in the coordinates of $\mathbf{L}$, not in activation space. Which matrix
# takes it back?
# ```

# %%
def ace_core(activity, relevance, r):
    """(singular values, D x r basis of the core)."""
    raise NotImplementedError  # your code here


ex.check_ace_core(ace_core);

# %% [markdown]
# ````{solution} ace-ex-core
# :class: dropdown
#
# ```{include} ../solutions/ace_method.md
# :start-after: <!-- ace-ex-core -->
# :end-before: <!-- end ace-ex-core -->
# ```
# ````
#
# ```{exercise} What a subspace is worth
# :label: ace-ex-keep
#
# 🔴🔴⚪⚪⚪ · 🔵🔵🔵🔵⚪ · about 15 minutes
#
# Write `keep_r2(readout, h, basis)`: the $R^2$ of the read-out after the centred core-only
# intervention $\tilde{\mathbf{h}} = \bar{\mathbf{h}} + \mathbf{P}(\mathbf{h} - \bar{\mathbf{h}})$
# onto the span of `basis` ($D \times k$, any basis of the subspace). `readout` maps an
# $N \times D$ array to $N$ numbers. This is the score behind {numref}`fig-ace-pca`.
#
# **Expected result**: on the chapter's example, {glue:text}`r2_ace_1:.3f` for ACE's direction
# and {glue:text}`r2_pca_1:.3f` for PCA's first; the check prints "keep_r2: all 6 cases pass".
# ```
#
# ```{admonition} Hint 1
# :class: dropdown
#
# $\mathbf{Q}\mathbf{Q}^\top$ is the orthogonal projector onto the span of $\mathbf{Q}$ only
# when its columns are orthonormal. What does `np.linalg.qr` give you?
# ```
#
# ```{admonition} Hint 2
# :class: dropdown
#
# $R^2$ compares $f(\mathbf{h})$ with $f(\tilde{\mathbf{h}})$ sample by sample, relative to the
# spread of $f(\mathbf{h})$ around its own mean. It can be negative.
# ```

# %%
def keep_r2(readout, h, basis):
    """R² of readout(h) after keeping only span(basis)."""
    raise NotImplementedError  # your code here


ex.check_keep_r2(keep_r2);

# %% [markdown]
# ````{solution} ace-ex-keep
# :class: dropdown
#
# ```{include} ../solutions/ace_method.md
# :start-after: <!-- ace-ex-keep -->
# :end-before: <!-- end ace-ex-keep -->
# ```
# ````
#
# ```{exercise} The $D \times D$ route
# :label: ace-ex-dxd
#
# 🔴🔴🔴⚪⚪ · 🔵🔵🔵⚪⚪ · about 20 minutes, pen and paper
#
# Let $\mathbf{H} \in \mathbb{R}^{N \times D}$ (centred) and $\mathbf{J} \in \mathbb{R}^{NK \times D}$
# have full column rank, and let $\mathbf{H}^\top\mathbf{H} = \mathbf{L}\mathbf{L}^\top$,
# $\mathbf{J}^\top\mathbf{J} = \boldsymbol{\Gamma}\boldsymbol{\Gamma}^\top$ with square invertible
# factors. Show that the non-zero singular values of $\mathbf{H}\mathbf{J}^\top$ are the singular
# values of $\mathbf{L}^\top\boldsymbol{\Gamma}$, and that
# $\operatorname{span}(\mathbf{H}^\top\mathbf{U}^{(HJ)}_r) = \operatorname{span}(\mathbf{L}\mathbf{U}_r)$
# where $\mathbf{U}^{(HJ)}$ and $\mathbf{U}$ are the left singular vectors of the two matrices.
# How do the normalisations $1/(N-1)$ and $1/M$ used by `corelib` change the answer?
#
# **Expected result**: the same singular values and the same core; the normalisations divide
# every singular value by $\sqrt{(N-1)M}$ and leave the core unchanged.
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# Write $\mathbf{H} = \mathbf{W}\mathbf{L}^\top$ and $\mathbf{J} = \mathbf{Z}\boldsymbol{\Gamma}^\top$.
# What is $\mathbf{W}^\top\mathbf{W}$?
# ```
#
# ````{solution} ace-ex-dxd
# :class: dropdown
#
# ```{include} ../solutions/ace_method.md
# :start-after: <!-- ace-ex-dxd -->
# :end-before: <!-- end ace-ex-dxd -->
# ```
#
# The direct route is implemented as `ace_direct` in `tests/test_ace.py`, which checks the
# scaling against `corelib.ace.extract`:
#
# ```{literalinclude} /tests/test_ace.py
# :language: python
# :pyobject: ace_direct
# ```
# ````
#
# ```{exercise} Invariance under a change of state coordinates
# :label: ace-ex-invariance
#
# 🔴🔴⚪⚪⚪ · 🔵🔵🔵🔵⚪ · about 15 minutes, pen and paper
#
# Replace the state of the linear system by $\tilde{\mathbf{x}} = \mathbf{V}\mathbf{x}$ for an
# invertible $\mathbf{V}$, i.e. $(\mathbf{A}_{\rm sys}, \mathbf{B}, \mathbf{C}) \mapsto
# (\mathbf{V}\mathbf{A}_{\rm sys}\mathbf{V}^{-1}, \mathbf{V}\mathbf{B}, \mathbf{C}\mathbf{V}^{-1})$.
# How do the two Gramians transform? Show that the ACE singular values do not change, and that the
# core is mapped to $\mathbf{V}\mathcal{C}$. What is the analogue for a network layer, where
# $\mathbf{h} \mapsto \mathbf{V}\mathbf{h}$ and the read-out is composed with $\mathbf{V}^{-1}$?
#
# **Expected result**: $\mathbf{W}_c \mapsto \mathbf{V}\mathbf{W}_c\mathbf{V}^\top$,
# $\mathbf{W}_o \mapsto \mathbf{V}^{-\top}\mathbf{W}_o\mathbf{V}^{-1}$; the same singular values
# and the core $\mathbf{V}\mathcal{C}$, for any invertible $\mathbf{V}$ (PCA only for orthogonal
# ones).
# ```
#
# ````{solution} ace-ex-invariance
# :class: dropdown
#
# ```{include} ../solutions/ace_method.md
# :start-after: <!-- ace-ex-invariance -->
# :end-before: <!-- end ace-ex-invariance -->
# ```
# ````
#
# ```{exercise} Principal angles by hand
# :label: ace-ex-angles
#
# 🔴🔴⚪⚪⚪ · 🔵🔵⚪⚪⚪ · about 20 minutes
#
# The principal angles between two subspaces with orthonormal bases $\mathbf{Q}_1$, $\mathbf{Q}_2$
# are the arccosines of the singular values of $\mathbf{Q}_1^\top\mathbf{Q}_2$. Implement this,
# compare it with `corelib.compare.principal_angles` (which returns degrees) on the two rank-$r$
# subspaces of this chapter and on a constructed pair with an angle of $10^{-8}$ rad. Why does
# the arccosine fail for tiny angles, and how can the singular values of
# $(\mathbf{I} - \mathbf{Q}_1\mathbf{Q}_1^\top)\mathbf{Q}_2$ fix it?
#
# **Expected result**: on the constructed pair the arccosine returns 0 (or round-off of order
# $10^{-8}$), the sine route returns $10^{-8}$ rad to full relative accuracy.
# ```
#
# ````{solution} ace-ex-angles
# :class: dropdown
#
# ```{include} ../solutions/ace_method.md
# :start-after: <!-- ace-ex-angles -->
# :end-before: <!-- end ace-ex-angles -->
# ```
#
# This solution is tested against `corelib` and `scipy.linalg.subspace_angles` in
# `tests/test_compare.py`:
#
# ```{literalinclude} /tests/test_compare.py
# :language: python
# :pyobject: principal_angles_by_hand
# ```
# ````
#
# ```{exercise} Activity tilts the core
# :label: ace-ex-tilt
#
# 🔴🔴⚪⚪⚪ · 🔵🔵🔵⚪⚪ · about 15 minutes, 2 of them running
#
# Rerun the chapter with `ace-book run ace_method -p pca_decorrelate false`, so that the
# synthetic components are independent in distribution but only approximately uncorrelated in
# the sample. ACE's direction now tilts away from $\mathbf{e}_D$ towards the loud axes, and
# keeping it alone no longer preserves the read-out. Explain both effects from
# $\mathcal{C} = \operatorname{span}(\hat{\mathbf{A}}\mathbf{w})$, and predict how the tilt
# scales with the number of samples $N$ and with the variances
# $\lambda_j = \operatorname{Var}(\mathbf{e}_j^\top\mathbf{h})$ (here the loudest is
# {glue:text}`variance_ratio:.0f` times the quietest). The run took 122 s of wall time on 2
# cores of an AMD EPYC that other jobs kept busy (load average about 10); the cost line at the
# top of the chapter times the same computation.
#
# **Expected result**: with the book's other parameters, ACE's direction is 15.4° from
# $\mathbf{e}_D$ and keeping it alone gives $R^2 = -0.80$; ACE needs 5 directions to keep
# $R^2 > 0.99$, PCA still all 6.
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# For a rank-one relevance along $\mathbf{w} = \mathbf{e}_D$, write $\hat{\mathbf{A}}\mathbf{w}$
# in the basis of the axes. Its components along the loud axes are sample covariances of
# independent variables: what are their mean and standard deviation?
# ```
#
# ````{solution} ace-ex-tilt
# :class: dropdown
#
# ```{include} ../solutions/ace_method.md
# :start-after: <!-- ace-ex-tilt -->
# :end-before: <!-- end ace-ex-tilt -->
# ```
# ````
