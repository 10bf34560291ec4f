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
# # Why weight decay inflates cores, and when grokking happens
#
# After a transformer has memorised modular addition, weight decay keeps pulling on its weights.
# The paper observes two consequences: the algorithmic core *grows* (more and more Fourier modes
# become active, up to all $\lfloor p/2 \rfloor$ of them), and the network eventually
# *generalises* (it groks), after a delay that shrinks with both the weight decay $\omega$ and the
# modulus $p$. It explains both with one small model, which this chapter derives step by step.
# Every step is checked numerically against an independent computation with `scipy`; the
# chapter shows each difference, and the tests (`tests/test_chapter_checks.py`) hold it to the
# tolerance quoted with it.
#
# 1. The $\lfloor p/2 \rfloor$ modes and their contributions $\psi_k$ to the margin; the identity
#    $\|\boldsymbol\psi\|^2 = 3p/4$ for odd $p$, and what changes for even $p$.
# 2. **Minimum norm requires maximum redundancy**: the smallest weights that achieve a given
#    margin use every mode.
# 3. **Margin dynamics**: after memorisation the margin relaxes exponentially to a level that
#    grows linearly with $p$.
# 4. **Grokking time** $\tau(p) = -\Omega \log(1 - p_{\rm crit}/p)$ and its $1/p$ asymptote.
# 5. How to read the paper's sweeps with this formula: power laws and the fit of
#    $(\Omega, p_{\rm crit})$.
#
# The parameters below set the model's constants. Change them, e.g.
# `python -m acebook.runner run grokking_theory -p omega 0.5 -p kappa 0.03`, and the curves move.
# All formulas live in `corelib.theory`; the training sweeps that measure real grokking delays are
# in another chapter.
#
# {glue:text}`cost`

# %% tags=["parameters"]
p = 53  # modulus of the mode, amplitude and margin plots (the paper's)
omega = 1.0  # weight decay, the relaxation rate of the margin
delta = 1.0  # margin needed to classify correctly
kappa = 0.0435  # saturation margin per unit of p (m_star is kappa p)
lr = 1e-3  # AdamW learning rate eta: ODE time into optimizer steps
p_check_max = 400  # the norm identity is checked for p from 2 to this
margin_ps = [17, 31, 53, 101]  # moduli whose margins are drawn
p_plot_max = 400  # largest modulus on the grokking-time plot
sweep_primes = [31, 43, 53, 61, 79, 89, 101]  # the paper's modulus sweep
sweep_omegas = [0.3, 0.5, 1.0, 1.5, 2.0, 3.0]  # the paper's decay sweep
n_seeds = 12  # synthetic runs per modulus in the fitting demonstration
noise_rel = 0.1  # relative seed-to-seed spread of the synthetic delays
seed = 0  # random seed of the synthetic delays

# %% tags=["hide-input"]
from myst_nb import glue

from acebook.run_times import cost_sentence

glue("cost", cost_sentence("grokking_theory"), display=False)

# %%
import matplotlib.pyplot as plt
from myst_nb import glue

from corelib import claims, plots
from corelib.experiments import grokking_theory as theory

params = theory.TheoryParams.from_namespace(globals())
plots.use_book_style()

# %% [markdown]
# ## Modes and their margins
#
# A transformer that solves $a + b \bmod p$ can do it with any of the Fourier modes
# $k = 1, \dots, \mu$, $\mu = \lfloor p/2 \rfloor$: mode $k$ represents each residue as a point on
# a circle and adds by rotating by $\theta_k = 2\pi k/p$ per unit. All modes give the same answer;
# they differ in how strongly they separate the correct logit from the others. At unit amplitude,
# mode $k$ adds
#
# $$
# \psi_k = 1 - \cos\theta_k > 0
# $$
#
# to the margin, so with amplitudes $\boldsymbol\alpha \ge 0$ the margin is
# $m = \langle \boldsymbol\alpha, \boldsymbol\psi \rangle$. The size of $\boldsymbol\psi$ will set
# how fast grokking happens. Expanding the square,
#
# $$
# \|\boldsymbol\psi\|^2 = \sum_{k=1}^{\mu} (1 - \cos\theta_k)^2
# = \frac{3\mu}{2} - 2 S_1 + \frac{1}{2} S_2, \qquad
# S_1 = \sum_{k=1}^{\mu} \cos\theta_k, \quad S_2 = \sum_{k=1}^{\mu} \cos 2\theta_k,
# $$
#
# using $\cos^2\theta = (1 + \cos 2\theta)/2$. The $p$-th roots of unity sum to zero, so
# $\sum_{k=0}^{p-1}\cos\theta_k = 0$. For **odd** $p$ the terms $k$ and $p-k$ have the same cosine,
# which gives $1 + 2S_1 = 0$, i.e. $S_1 = -\tfrac12$; and $k \mapsto 2k \bmod p$ permutes the
# non-zero residues, so $S_2 = -\tfrac12$ as well. With $\mu = (p-1)/2$:
#
# $$
# \|\boldsymbol\psi\|^2 = \frac{3(p-1)}{4} + 1 - \frac14 = \frac{3p}{4} \qquad (p \text{ odd}).
# $$
#
# For **even** $p \ge 4$, $\mu = p/2$ and the last mode, $\theta_{p/2} = \pi$, is its own partner
# (a reflection rather than a rotation, with $\psi_{p/2} = 2$). Now
# $1 + 2\sum_{k<p/2}\cos\theta_k - 1 = 0$, so $S_1 = -1$, and $S_2$ sums the $(p/2)$-th roots of
# unity over a full period, $S_2 = 0$: $\|\boldsymbol\psi\|^2 = 3p/4 + 2$. The extra $2$ is the
# reflection mode's $\psi^2 = 4$ minus the $2$ that the rotation modes lose compared with the odd
# case. Either way $\|\boldsymbol\psi\|^2$ grows linearly in $p$: every additional mode adds to the
# margin-driving direction. We check both formulas for every modulus up to
# {glue:text}`p_check_max`.

# %%
norms = theory.norm_identity(params)
print(f"max relative error, odd p:  {norms['rel_err_odd']:.1e}")
print(f"max relative error, even p: {norms['rel_err_even']:.1e}")
claims.record(  # an identity: no settings
    "grokking_theory", {"theory.psi_norm": norms["rel_err_odd"]},
    settings={})

# %% [markdown]
# The figure shows $\boldsymbol\psi$ for $p =$ {glue:text}`p` and $\|\boldsymbol\psi\|^2$ for every
# modulus: the values computed from the vectors fall on the two lines.

# %% tags=["hide-input"]
fig = plots.figure_psi(norms)
glue("fig_psi", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_psi
# :name: fig-grok-psi
#
# Left: margin contribution $\psi_k$ of each of the {glue:text}`mu` modes for
# $p =$ {glue:text}`p`; the rotations by nearly half a turn contribute most. Right:
# $\|\boldsymbol\psi\|^2$ computed from the vectors (dots, shown up to $p = 60$) and the two
# closed forms (lines).
# ```
#
# For every odd modulus up to {glue:text}`p_check_max` the sum of squares equals $3p/4$ to a
# relative error of at most {glue:text}`rel_err_odd:.1e`, and for every even one it equals
# $3p/4 + 2$ to {glue:text}`rel_err_even:.1e` (threshold {glue:text}`norm_rel_tol:.0e`). For
# $p =$ {glue:text}`p` there are {glue:text}`mu` modes with $\psi_k$ between
# {glue:text}`psi_min:.3f` and {glue:text}`psi_max:.3f`, and
# $\|\boldsymbol\psi\|^2 =$ {glue:text}`psi_norm_sq_p:.4g`.

# %% [markdown]
# ## Minimum norm requires maximum redundancy
#
# If the modes live in (approximately) orthogonal parameter subspaces, the squared weight norm is
# $\|\mathbf W\|^2 \approx \|\boldsymbol\alpha\|^2$. Once the training loss is negligible, weight
# decay is the dominant force and drives the network towards the smallest weights that still
# classify correctly:
#
# $$
# \min_{\boldsymbol\alpha \ge \mathbf 0} \; \|\boldsymbol\alpha\|^2
# \quad \text{subject to} \quad \langle \boldsymbol\alpha, \boldsymbol\psi \rangle \ge \delta .
# $$
#
# By Cauchy--Schwarz, $\delta \le \langle \boldsymbol\alpha, \boldsymbol\psi \rangle \le
# \|\boldsymbol\alpha\|\,\|\boldsymbol\psi\|$, so $\|\boldsymbol\alpha\|^2 \ge \delta^2 /
# \|\boldsymbol\psi\|^2$, with equality exactly when $\boldsymbol\alpha$ is parallel to
# $\boldsymbol\psi$ and the margin is exactly $\delta$:
#
# $$
# \boldsymbol\alpha^{\ast} = \frac{\delta}{\|\boldsymbol\psi\|^2}\,\boldsymbol\psi, \qquad
# \|\boldsymbol\alpha^{\ast}\|^2 = \frac{\delta^2}{\|\boldsymbol\psi\|^2}
# \overset{p\ \text{odd}}{=} \frac{4\delta^2}{3p}.
# $$
#
# Since every $\psi_k > 0$, the sign constraint is inactive and **every mode is used**. The
# cheapest single-mode solution instead puts everything on the mode with the largest $\psi_k$ and
# costs $\delta^2/\psi_{\max}^2$, about $3p/16$ times more for large odd $p$ (as
# $\psi_{\max} \to 2$). A convenient count of active modes is the participation ratio
# $(\sum_k \alpha_k)^2 / \sum_k \alpha_k^2$; for $\boldsymbol\alpha^\ast$ it equals
# $(\sum_k\psi_k)^2/\|\boldsymbol\psi\|^2$, and since $\sum_k \psi_k = \mu - S_1 = p/2$ for odd $p$,
# it is $p/3$.
#
# To check the Cauchy--Schwarz argument, `min_norm_amplitudes_numeric` solves the same constrained
# problem with `scipy.optimize.minimize` (SLSQP, starting from the single best mode) without using
# it, and we compare.

# %%
amplitudes = theory.amplitudes(params)
print(f"max |alpha* - alpha_SLSQP| = {amplitudes['error']:.1e}")
print(f"||alpha*||^2 = {amplitudes['star_cost']:.4g}, "
      f"best single mode: {amplitudes['single_cost']:.4g}")

# %% tags=["hide-input"]
fig = plots.figure_amplitudes(amplitudes)
glue("fig_amplitudes", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_amplitudes
# :name: fig-grok-amplitudes
#
# Left: the minimum-norm amplitudes $\boldsymbol\alpha^\ast$ for $p =$ {glue:text}`p` and
# $\delta =$ {glue:text}`delta:.3g` (bars) and the solution found by SLSQP (crosses). Right: the
# squared norm needed for margin $\delta$ when only the best mode is used, and when all modes are
# used in proportion to $\boldsymbol\psi$.
# ```
#
# SLSQP, which knows nothing about Cauchy--Schwarz, lands on $\boldsymbol\alpha^\ast$ to within
# {glue:text}`amp_err:.1e` (threshold {glue:text}`amplitude_tol:.0e`). For $p =$ {glue:text}`p`
# the best single mode needs $\|\boldsymbol\alpha\|^2 =$ {glue:text}`single_cost:.3g`, all modes
# together only {glue:text}`star_cost:.3g`: {glue:text}`cost_ratio:.3g` times less (the large-$p$
# estimate $3p/16$ gives {glue:text}`cost_ratio_approx:.3g`). The participation ratio of
# $\boldsymbol\alpha^\ast$ is {glue:text}`pr_star:.4g`, equal to $p/3 =$ {glue:text}`p_over_3:.4g`.
# This is the paper's explanation of core inflation: weight decay does not prune modes, it
# spreads the weight over all of them, and a core that counts active modes grows towards
# $\lfloor p/2 \rfloor$.

# %% [markdown]
# ## Margin dynamics after memorisation
#
# The same pressure sets the pace of grokking. After memorisation the amplitudes feel the weight
# decay $-\omega\boldsymbol\alpha$ and the smallest correction that keeps the training loss at zero.
# By the argument above (with margin $1$ instead of $\delta$), the minimum-norm update that raises
# the margin is parallel to $\boldsymbol\psi$, so the correction is $\gamma(t)\boldsymbol\psi$.
# Ignoring the optimizer's zero-mean noise,
#
# $$
# \dot{\boldsymbol\alpha} = -\omega\boldsymbol\alpha + \gamma(t)\,\boldsymbol\psi
# \quad\Longrightarrow\quad
# \dot m = \langle \dot{\boldsymbol\alpha}, \boldsymbol\psi \rangle = -\omega m + \gamma(t)\,\|\boldsymbol\psi\|^2 .
# $$
#
# Weight decay is the only systematic force pulling the network off the zero-loss manifold, so the
# correction is taken proportional to it, $\gamma(t) \approx c\,\omega$. With a memorised state that
# carries no margin, $m(0) = 0$:
#
# $$
# \dot m = -\omega\,(m - m^\ast), \qquad m(t) = m^\ast\left(1 - e^{-\omega t}\right), \qquad
# m^\ast = c\,\|\boldsymbol\psi\|^2 \overset{p\ \text{odd}}{=} \tfrac34 c\,p = \kappa p,
# $$
#
# which defines $\kappa = 3c/4$. The amplitudes themselves relax to $c\,\boldsymbol\psi$, which is
# parallel to $\boldsymbol\alpha^\ast$: the dynamics end in the minimum-norm direction, and the
# memorised component decays like $e^{-\omega t}$. With $\kappa =$ {glue:text}`kappa:.3g` the
# correction scale is $c = 4\kappa/3 =$ {glue:text}`c_const:.3g`. We integrate the ODE with
# `scipy.integrate.solve_ivp` (8th-order Dormand--Prince, tight tolerances) for the moduli
# {glue:text}`margin_ps_text` and compare with the closed form.

# %%
margins = theory.margins(params)
print(f"max |closed form - solve_ivp| = {margins['error']:.1e}")

# %% tags=["hide-input"]
fig = plots.figure_margin(margins)
glue("fig_margin", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_margin
# :name: fig-grok-margin
#
# Margin trajectories for several moduli: closed form (lines) and `solve_ivp` (circles). The
# dashed line is the threshold $\delta$; the bars mark the grokking times. Moduli with
# $\kappa p \le \delta$, i.e. $p \le p_{\rm crit} =$ {glue:text}`p_crit:.4g`, saturate below the
# threshold and never grok. Time is converted to optimizer steps as explained in the next section.
# ```
#
# The closed form and the numerical solution agree to {glue:text}`ode_err:.1e` (threshold
# {glue:text}`ode_tol:.0e`).

# %% [markdown]
# ## Grokking time
#
# Grokking happens when the margin first reaches $\delta$. Solving $m(\tau) = \delta$:
#
# $$
# \tau(p) = -\frac{1}{\omega}\log\left(1 - \frac{\delta}{\kappa p}\right)
# = -\Omega \log\left(1 - \frac{p_{\rm crit}}{p}\right), \qquad
# \Omega = \frac{1}{\omega}, \quad p_{\rm crit} = \frac{\delta}{\kappa} = \frac{4\delta}{3c}.
# $$
#
# The architectural constant $p_{\rm crit}$ decides whether grokking can happen at all (it needs
# $m^\ast = \kappa p > \delta$); the optimizer constant $\Omega$ sets its time scale. For
# $p \gg p_{\rm crit}$, $-\log(1-x) = x + x^2/2 + \dots$ with $x = p_{\rm crit}/p$ gives
#
# $$
# \tau(p) \approx \frac{\Omega\, p_{\rm crit}}{p} = \frac{\delta}{\omega\,\kappa\, p}
# \propto \frac{1}{\omega p}, \qquad
# \frac{\tau(p)}{\Omega p_{\rm crit}/p} - 1 \approx \frac{p_{\rm crit}}{2p}.
# $$
#
# **From ODE time to optimizer steps.** AdamW's decoupled weight decay multiplies the weights by
# $1 - \eta\omega$ at every step ($\eta$ the learning rate), i.e. by $\approx e^{-\eta\omega n}$
# after $n$ steps, so ODE time is $t = \eta n$ and pure weight decay would give
# $\Omega = 1/(\eta\omega)$ steps. With $\eta =$ {glue:text}`lr:.0e` and
# $\omega =$ {glue:text}`omega:.3g` that is {glue:text}`Omega_steps:.4g` steps. The paper treats
# $\Omega$ as an empirical constant that also absorbs the optimizer's preconditioning and momentum,
# and fits $\hat\Omega \approx$ {glue:text}`paper_Omega:.4g` steps and
# $\hat p_{\rm crit} \approx$ {glue:text}`paper_p_crit:.3g` -- {glue:text}`paper_Omega_ratio:.3g`
# times the idealised $\Omega$. We check the formula against the first-hitting time of the
# numerically integrated ODE (a `solve_ivp` event) at the paper's primes.

# %%
delays = theory.grokking_delays(params)
print("tau (steps):", (delays["closed"] / lr).round())
print("max relative difference to the solve_ivp hitting time: "
      f"{delays['error']:.1e}")

# %% tags=["hide-input"]
fig = plots.figure_delay(delays)
glue("fig_tau", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_tau
# :name: fig-grok-tau
#
# Left: predicted grokking delay in optimizer steps for the chapter's constants (green), its
# $1/p$ asymptote (dotted), the paper's fitted curve (grey) and the first-hitting times of the
# integrated ODE at the paper's primes (circles). The delay diverges at $p_{\rm crit}$ (dashed).
# Right: relative error of the $1/p$ asymptote against $p_{\rm crit}/(2p)$.
# ```
#
# The closed form agrees with the `solve_ivp` hitting times to a relative
# {glue:text}`hit_err:.1e`. For $p =$ {glue:text}`p` the model predicts
# $\tau =$ {glue:text}`tau_p:.4g` steps; the asymptote $\Omega p_{\rm crit}/p$ gives
# {glue:text}`asym_p:.4g`: $\tau$ exceeds it by a relative {glue:text}`asym_rel_p:.2g`, against
# the first-order estimate $p_{\rm crit}/(2p) =$ {glue:text}`half_x_p:.2g` (the higher terms
# $x^2/3 + \dots$ still matter at $x =$ {glue:text}`x_p:.2g`). The $1/p$ law is only reached for
# $p$ many times $p_{\rm crit}$; over the paper's primes the curve is noticeably steeper (see
# {ref}`grok-ex-exponent`).

# %% [markdown]
# ## Reading the sweeps
#
# The paper tests two predictions. **Weight decay**: at fixed $p$, $\tau \propto \Omega \propto
# 1/\omega$, so a power law $\tau = C\omega^\beta$ fitted by least squares in log--log space should
# give $\beta = -1$. In the model this is exact; the paper measures
# {glue:text}`paper_omega_exponent:.3g`. **Modulus**: at fixed $\omega$, fit $\Omega$ and
# $p_{\rm crit}$ to the measured delays with `scipy.optimize.curve_fit` (`fit_grok_time`). Before
# this is used on trained transformers, it must recover known constants: first from noise-free
# model delays, then from synthetic delays with a relative seed-to-seed spread of
# {glue:text}`noise_rel:.2g` ({glue:text}`n_seeds` runs per prime, log-normal).

# %%
fits = theory.sweep_fits(delays)
power, exact = fits["omega_fit"], fits["exact_fit"]
noisy = fits["noisy_fit"]
print(f"tau versus omega at p {p}: exponent {power.exponent:.6f}, "
      f"R^2 {power.r2:.6f}")
print(f"noise-free fit: Omega {exact.Omega:.6g}, "
      f"p_crit {exact.p_crit:.6g}, R^2 {exact.r2:.6f}")
print(f"noisy fit: Omega {noisy.Omega:.0f} ± {noisy.Omega_se:.0f}, "
      f"p_crit {noisy.p_crit:.2f} ± {noisy.p_crit_se:.2f}, "
      f"R^2 {noisy.r2:.3f}")

# %% tags=["hide-input"]
fig = plots.figure_theory_sweeps(fits)
glue("fig_sweeps", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_sweeps
# :name: fig-grok-sweeps
#
# Left: the model's grokking delay at $p =$ {glue:text}`p` for the paper's weight decays, with a
# least-squares power law in log--log space. Right: synthetic delays at the paper's primes
# (mean ± sd over {glue:text}`n_seeds` runs), the planted curve and the curve fitted by
# `fit_grok_time` to all runs.
# ```
#
# The power law in $\omega$ has exponent {glue:text}`omega_exponent:.6g` in the model (the paper
# measures {glue:text}`paper_omega_exponent:.3g` on transformers). From noise-free delays at
# {glue:text}`n_primes` primes, `fit_grok_time` recovers the planted $\Omega$ and $p_{\rm crit}$
# to a relative {glue:text}`fit_rel_err:.1e` (threshold {glue:text}`fit_rel_tol:.0e`, $R^2 =$
# {glue:text}`exact_r2:.6f`). From the noisy runs it finds $\hat\Omega =$
# {glue:text}`noisy_Omega:.4g` ± {glue:text}`noisy_Omega_se:.2g` steps and $\hat p_{\rm crit} =$
# {glue:text}`noisy_p_crit:.3g` ± {glue:text}`noisy_p_crit_se:.2g` (planted:
# {glue:text}`Omega_steps:.4g` and {glue:text}`p_crit:.3g`), $R^2 =$ {glue:text}`noisy_r2:.3f`.
# The standard errors come from `curve_fit`'s covariance; $\Omega$ and $p_{\rm crit}$ are strongly
# correlated, because far from $p_{\rm crit}$ the data only constrain their product
# $\Omega p_{\rm crit}$.

# %% [markdown]
# ## Summary
#
# * Fourier symmetry gives $\lfloor p/2 \rfloor$ equivalent modes whose margin contributions have
#   $\|\boldsymbol\psi\|^2 = 3p/4$ for odd $p$ ($3p/4 + 2$ for even $p \ge 4$).
# * The minimum-norm amplitudes at margin $\delta$ are $\delta\boldsymbol\psi/\|\boldsymbol\psi\|^2$:
#   weight decay spreads weight over every mode (participation ratio $p/3$), which is the paper's
#   explanation of core inflation.
# * After memorisation the margin relaxes as $m^\ast(1 - e^{-\omega t})$ with $m^\ast = \kappa p$,
#   so the grokking delay is $-\Omega\log(1 - p_{\rm crit}/p)$ with $\Omega = 1/\omega$ (in ODE
#   time) and $p_{\rm crit} = \delta/\kappa$; it approaches $\Omega p_{\rm crit}/p$ for large $p$.
# * `corelib.theory` fits both of the paper's scaling laws and recovers planted constants.

# %% tags=["hide-input"]
summary = {"norms": norms, "amplitudes": amplitudes, "margins": margins,
           "fits": fits}
for name, value in theory.glue_values(summary).items():
    glue(name, value, display=False)

# %% [markdown]
# ## Exercises
#
# ```{exercise} Even moduli
# :label: grok-ex-even
#
# Show that $\|\boldsymbol\psi\|^2 = 3p/4 + 2$ for even $p \ge 4$ and $= 4$ for $p = 2$. How large
# is $\|\boldsymbol\psi\|^2$ without the mode $k = p/2$, and why is that mode different from the
# others?
# ```
#
# ````{solution} grok-ex-even
# :class: dropdown
#
# With $\mu = p/2$, $\|\boldsymbol\psi\|^2 = 3\mu/2 - 2S_1 + S_2/2$ as in the text. The roots of
# unity give $1 + 2\sum_{k=1}^{p/2-1}\cos\theta_k + \cos\pi = 0$, so the sum over $k < p/2$ is 0
# and $S_1 = \cos\pi = -1$. $S_2 = \sum_{k=1}^{p/2}\cos\bigl(2\pi k/(p/2)\bigr)$ is a full period of
# the $(p/2)$-th roots of unity, which sums to $0$ when $p/2 \ge 2$ and to $1$ when $p = 2$.
# Hence $3p/4 + 2$ for $p \ge 4$, and $3/2 + 2 + 1/2 = 4$ for $p = 2$ (directly: $\psi_1 = 2$).
# Without the last mode ($\psi_{p/2} = 1 - \cos\pi = 2$) the sum is $3p/4 + 2 - 4 = 3p/4 - 2$. The
# mode $k = p/2$ maps residue $x$ to the angle $\pi x$: it takes only the values $\pm 1$, so it is
# a one-dimensional sign flip rather than a 2D rotation, and it is its own partner ($k = p - k$).
# `tests/test_theory.py::test_psi_norm_sq_for_even_p_has_the_extra_reflection_mode` checks both
# statements.
# ````
#
# ```{exercise} Which exponent does a power law in p find?
# :label: grok-ex-exponent
#
# Suppose the paper's fitted curve, $\Omega = 2770$ and $p_{\rm crit} = 23$, were exact. Using
# `corelib.theory`, fit a power law $\tau = C p^\beta$ to it over the paper's primes
# $31, \dots, 101$, and over $300 \le p \le 3000$. Explain the difference with the local slope
# $d\log\tau/d\log p$ as a function of $x = p_{\rm crit}/p$.
# ```
#
# ````{solution} grok-ex-exponent
# :class: dropdown
#
# ```python
# import numpy as np
# from corelib.theory import fit_power_law, grok_time
# primes = np.array([31, 43, 53, 61, 79, 89, 101])
# near_exponent = fit_power_law(primes, grok_time(primes, 2770, 23)).exponent
# far = np.geomspace(300, 3000, 10)
# far_exponent = fit_power_law(far, grok_time(far, 2770, 23)).exponent
# ```
#
# The exponent is {glue:text}`ex_near_exponent:.3g` over the primes and
# {glue:text}`ex_far_exponent:.3g` for $300 \le p \le 3000$. Differentiating
# $\tau = -\Omega\log(1 - x)$,
#
# $$
# \frac{d\log\tau}{d\log p} = -\frac{x}{(1 - x)\,\bigl(-\log(1 - x)\bigr)}
# = -\Bigl(1 + \frac{x}{2} + O(x^2)\Bigr),
# $$
#
# which tends to $-1$ only as $x \to 0$ and diverges as $p \to p_{\rm crit}$. At the geometric
# middle of the primes it is {glue:text}`ex_local_slope:.3g`. A power-law fit averages this local
# slope over the range, so the $1/p$ law can only be seen directly far above $p_{\rm crit}$; near
# it one must fit the full curve, as `fit_grok_time` does.
# ````
#
# ```{exercise} A memorised state that already carries margin
# :label: grok-ex-initial
#
# Redo the derivation with $m(0) = m_0$, $0 \le m_0 < \delta$. Does $p_{\rm crit}$ change? How does
# the large-$p$ asymptote change? Check your formula with
# `corelib.theory.margin_trajectory(t, omega, m_star, m0)`.
# ```
#
# ```{solution} grok-ex-initial
# :class: dropdown
#
# The ODE is unchanged, only the initial condition differs:
# $m(t) = m^\ast + (m_0 - m^\ast)e^{-\omega t}$. Setting $m(\tau) = \delta$ gives
#
# $$
# \tau = \frac{1}{\omega}\log\frac{m^\ast - m_0}{m^\ast - \delta}
# = -\Omega\left[\log\Bigl(1 - \frac{p_{\rm crit}}{p}\Bigr) - \log\Bigl(1 - \frac{m_0}{\kappa p}\Bigr)\right].
# $$
#
# Grokking still requires $m^\ast = \kappa p > \delta$, so $p_{\rm crit} = \delta/\kappa$ is
# unchanged: it is set by where the margin saturates, not where it starts. For large $p$,
# $\tau \approx \Omega (\delta - m_0)/(\kappa p)$: the $1/(\omega p)$ scaling survives with a
# smaller prefactor. The check: `margin_trajectory(tau, omega, kappa * p, m0)` returns $\delta$
# for this $\tau$, and `corelib.theory.hitting_time_numeric(omega, kappa * p, delta, m0)` returns
# this $\tau$.
# ```
