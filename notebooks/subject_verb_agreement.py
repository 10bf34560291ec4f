# ---
# jupyter:
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
# # Subject–verb agreement: a shared one-dimensional core in language models
#
# The toy models of the previous chapters were trained by us on tasks we designed. This chapter
# asks whether ACE finds cores in **pretrained language models**, on a piece of grammar they
# learned from text: *subject–verb number agreement*. After "The keys to the cabinet" a model
# should prefer *are* to *is*, although the noun right before the verb, the *attractor*
# "cabinet", is singular. We reproduce the paper's Section "Scaling ACE to LLMs" (its Figures 5
# and 6 and Tables A5–A7):
#
# 1. at every layer, ACE extracts a **rank-1 core** of the number margin; a layer sweep finds
#    where the core is causally strongest;
# 2. at that layer the core is **sufficient, necessary and controllable**: keeping only it
#    preserves agreement, removing it destroys it, reflecting it inverts it;
# 3. the cores of **different models align**: the same prompts get nearly the same core
#    coordinate;
# 4. **steering** the core during generation makes the model write agreement errors, while
#    tokens that involve no agreement decision are left alone.
#
# The paper used GPT-2, Llama-3.1-8B, Gemma-2-9B and Qwen2.5-32B. No model hub is reachable
# where this book is built, so the published book uses the two real pretrained models that ship
# as Python packages: **SmolLM2-135M-Instruct** (a Llama-architecture model) and **Gemma-3
# 270M** (see `corelib.lm`). With a network, pass any model names, e.g.
# `python -m acebook.runner run subject_verb_agreement -p models "[gpt2, gpt2-medium]"`; the
# code runs on a GPU when there is one and spreads large models over several.
#
# {glue:text}`cost`

# %% tags=["parameters"]
# offline names (corelib.lm.available_models()) or hub names
models = ["smollm2-135m", "gemma3-270m"]  # the language models
n_per_number = 600       # singular prompts, as many plural (paper: 600)
dataset_seed = 0         # draws of words and pads, shuffle and split
layer_stride = 3         # sweep every 3rd layer and the last (paper: 1)
# interventions evaluated at every swept layer
sweep_modes = ["remove", "flip"]  # interventions swept (paper: keep too)
batch_size = 200         # prompts per forward pass
eps = 1e-8               # relative jitter of the ACE square-root factors
max_new_tokens = 30      # tokens per steering prompt (the paper: 50)
control_new_tokens = 20  # tokens generated per control prompt
n_display = 3            # sampled continuations shown side by side
# sampled continuations per steering prompt (the paper: "several")
n_samples = 3            # sampled continuations per steering prompt
# steer a token only if is/are/was/were hold this much probability (the
# paper gates without a value; the reference code does not gate: 0)
gate = 0.2               # verb probability that lets steering act
# gates also measured, for the table that justifies `gate`
gate_grid = [0.1, 0.2, 0.3, 0.5]  # gates of the gate table
# strength of the probing pass that measures the local gain (reference)
probe = 0.2              # strength of the probing pass
epsilon = 1.0            # margin buffer of the flip, logits (reference)
cap = 50.0               # largest steering strength |s| (reference code)
temperature = 1.0        # sampling (the paper: 1)
top_k = 50               # (the paper: 50)
generation_seed = 0

# %% tags=["hide-input"]
from myst_nb import glue

from acebook.run_times import cost_sentence

glue("cost", cost_sentence("subject_verb_agreement"), display=False)

# %%
import matplotlib.pyplot as plt
from IPython.display import HTML, display
from myst_nb import glue

from acebook.claims_page import chapter_frame
from corelib import claims, plots
from corelib.experiments import sva
from corelib.lm import available_models
from corelib.tasks.sva import make_dataset

params = sva.SVAParams.from_namespace(globals())
dataset = make_dataset(n_per_number, dataset_seed)

# %% [markdown]
# ## Prompts and the number margin
#
# The prompts combine a head noun (*key*/*keys*, *child*/*children*, ...) with an attractor of
# the opposite number through a connector (*to the*, *next to the*, ...) in five templates; half
# are prefixed with "In the past," so that both tenses are plausible continuations
# (`corelib.tasks.sva`). A few of them:

# %%
display(sva.example_prompts(dataset))
print("offline models:", available_models())

# %% [markdown]
# The {glue:text}`n_prompts` prompts are split in two halves of {glue:text}`n_half`: cores are
# extracted on the first, everything else is measured on the second. The model's preference is
# read from the residual stream $\mathbf h$ of the last token through the **number margin**
#
# $$ f(\mathbf h) = (\ell_{\it are} + \ell_{\it were}) - (\ell_{\it is} + \ell_{\it was}), $$
#
# the plural minus the singular verb logits (only these four rows of the unembedding are
# needed). Agreement is scored by the **AUC**: the probability that a random plural prompt gets
# a larger margin than a random singular one (1: perfect, 0.5: chance, 0: inverted).
#
# ## A core at every layer
#
# For each layer $l$, ACE needs the last-token activations $\mathbf h_l$ and the Jacobians
# $\partial f/\partial \mathbf h_l$. The margin depends on every layer's residual stream, so one
# backward pass gives them all: a zero vector $\boldsymbol\delta_l$ is added to the last token at
# every hook `blocks.{l}.hook_resid_post`, and the gradient of the summed margin with respect to
# the $\boldsymbol\delta_l$ is every prompt's Jacobian at every layer. With a scalar target the
# relevance matrix is dominated by one direction, and the core is taken with rank 1.
#
# Each core is then tested on the held-out prompts by three interventions at the last token,
# centred on the mean activation $\boldsymbol\mu$ of the training prompts ($\mathbf P$ projects
# onto the core): **keep** $\boldsymbol\mu + \mathbf P(\mathbf h - \boldsymbol\mu)$, **remove**
# $\mathbf h - \mathbf P(\mathbf h - \boldsymbol\mu)$, and **flip**
# $\mathbf h - 2\mathbf P(\mathbf h - \boldsymbol\mu)$. The chosen layer is the one whose flip
# lowers the AUC most. (Only the last token changes, so the prompt prefix is computed once and
# each intervention re-runs one position.)

# %%
summary = sva.run(params)
claims.record(  # for the claims page
    "subject_verb_agreement", sva.claim_values(summary),
    settings=sva.paper_deviations(params))

# %% tags=["hide-input"]
for name, value in sva.glue_values(params, summary, dataset).items():
    glue(name, value, display=False)

# %% tags=["hide-input"]
fig = plots.figure_sva(summary)
glue("fig_sva", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_sva
# :name: fig-sva
#
# **Subject–verb agreement is mediated by a one-dimensional core.** (A) Layer sweep: AUC of the
# margin under core-only, core-removed and core-flipped interventions against normalised depth
# (markers: models; line and band: mean and min–max over models; dashed: unmodified models).
# (B) The core coordinate of the held-out prompts against their margin, both z-scored, with each
# model's affine fit. (C) Prompt-level agreement (the margin signed towards the correct verb) with
# the core removed or flipped at the chosen layer; p-values of paired Wilcoxon tests against the
# unmodified model, combined over models with Fisher's method.
# ```
#
# **(A) A late core.** Unmodified, {glue:text}`model_list` separate plural from singular
# prompts with AUC {glue:text}`base_min:.3f`–{glue:text}`base_max:.3f`. Cores of the early
# layers barely matter; flipping a late-layer core inverts agreement. The chosen layers are
# {glue:text}`layers_text`, all past {glue:text}`depth_min:.0%` of the depth. (This build swept
# {glue:text}`swept_text`, measuring {glue:text}`sweep_modes_text` at each; every intervention
# is measured at the chosen layer.)
#
# **Sufficient, necessary, controllable.** At the chosen layer the core is one direction
# separated from the rest by a spectral gap $(\sigma_1/\sigma_2)^2$ of at least
# {glue:text}`gap_min:.1f` (the paper's Table A6 reports $(\sigma_1/\sigma_2)^4$: its code squares
# the singular values before taking the ratio squared, so the table below gives both). Keeping only that direction leaves the AUC at least
# {glue:text}`keep_min:.3f`; removing it brings it down to at most {glue:text}`remove_max:.3f`;
# flipping it to at most {glue:text}`flip_max:.3f`: the models then prefer the verb of the
# wrong number.

# %%
tables = sva.tables(summary)
display(tables["A6"])
display(tables["A7"])

# %% [markdown]
# **(B) A graded number axis.** The core coordinate is not just a binary switch: it predicts the
# margin almost linearly (panel B), as the linear-representation hypothesis would have it. The
# sign of a core is arbitrary; we orient each so that a larger coordinate means "more plural".
#
# **(C) Prompt by prompt.** The AUC summarises a distribution; panel C shows the prompts. Removing
# the core pulls every prompt's agreement score towards zero, flipping it pushes most of them
# below zero.

# %% [markdown]
# For instance, on "{glue:text}`ex_prompt`" {glue:text}`ex_model` has margin
# {glue:text}`ex_base:.2f` (it prefers the singular verb, correctly); with the core flipped the
# margin becomes {glue:text}`ex_flip:.2f`. The combined p-values are {glue:text}`p_remove:.1e`
# for removal and {glue:text}`p_flip:.1e` for the flip.
#
# ## Different models, the same coordinate
#
# Because each core is one-dimensional, comparing two models needs no canonical correlation
# analysis: fix the sign and correlate the coordinates the two models give the same held-out
# prompts.

# %%
display(tables["A5"])

# %% [markdown]
# The models share no architecture details, tokenizer or training data, yet their agreement
# coordinates correlate with Pearson's $r \ge$ {glue:text}`pearson_min:.2f` (Spearman's
# $\rho \ge$ {glue:text}`spearman_min:.2f`; with one pair of models, these are its values).
#
# ## Steering generation
#
# The last test is open-ended text. At every decoding step the last token's hidden state at the
# core's layer is reflected by a per-token strength $s$,
# $\tilde{\mathbf h} = \mathbf h - 2s\,[(\mathbf h - \boldsymbol\mu)^\top\mathbf q]\,\mathbf q$
# (`corelib.steering`): a clean pass *gates* (no steering unless is/are/was/were hold at least
# a share $\gamma$ of the next-token probability), a *probe* at a small strength measures how
# fast the margin $m = \log\sum_{are,were} e^{\ell} - \log\sum_{is,was} e^{\ell}$ moves with
# $s$, and the step uses the strength that moves $m$ just across zero, to
# $-\operatorname{sign}(m_0)\,\varepsilon$, capped at $|s| \le$ {glue:text}`cap_value`. The
# paper gives none of these values; the probe strength {glue:text}`probe_value`, the buffer
# $\varepsilon =$ {glue:text}`epsilon_value` and the cap are the reference code's. The reference
# code does not gate at all ($\gamma = 0$), which the paper's description contradicts; the gate
# here is this book's, and the table below shows every threshold including the smallest.
#
# We count, over greedy continuations of {glue:text}`n_steer` fixed prompts, the *agreement
# decisions*: steps at which the unmodified model would have written one of the four verbs, or
# the steered model wrote one, whether or not the gate opened (a verb the gate let through
# unsteered is a decision steering missed). A decision is *inverted* when the written verb has
# the number that the unmodified model disfavoured at that step (the sign of its margin). The
# stricter rate counts only the decisions where the unmodified model would have written a verb:
# there steering must both flip the number and keep a verb the most likely token. As a control,
# {glue:text}`n_control` prompts with no agreement decision in sight (counting, lists of days,
# colours, planets, a line of code, ...): a continuation whose unsteered text contains none of
# the four verbs must come out unchanged.
#
# ### The gate threshold
#
# The paper does not give $\gamma$. It trades the two criteria against each other: a low gate
# also fires where a verb is merely possible, such as at the end of a list, which may become the
# subject of a sentence ("Monday, Tuesday, Wednesday, and Thursday ..."); a high gate lets verbs
# through unsteered. We therefore ran every prompt at each threshold of a grid; the table gives,
# per model and threshold, the inversion rate and the decision-free control continuations that
# came out unchanged.

# %%
display(sva.gate_frame(summary))

# %% [markdown]
# Thresholds of the grid ({glue:text}`gate_grid_text`) at which every model meets both steering
# criteria (its inversion rate passes the tolerance of the claim `sva.steering_rate`, and its
# share of unchanged decision-free controls that of `sva.steering_untouched`):
# {glue:text}`gates_passing`. {glue:text}`gate_verdict` The threshold was chosen with this table,
# on these prompts, so the controls at that threshold are not an independent test of it; the
# rows of the other thresholds show how sensitive the result is.

# %%
display(sva.steering_table(summary))
display(sva.control_table(summary))

# %% [markdown]
# At γ = {glue:text}`gate_value`, over {glue:text}`decisions_total` agreement decisions,
# steering inverted at least {glue:text}`inv_min:.0%` per model ({glue:text}`strict_min:.0%` by
# the stricter count). Control continuations without agreement decisions that came out
# unchanged: {glue:text}`control_text`. Of the {glue:text}`control_changed` control
# continuations that changed, {glue:text}`control_changed_verbs` had a verb decision of their
# own in the unsteered text; the table shows the text up to the token where the gate first
# fired. Below, sampled continuations (temperature {glue:text}`temperature_value`,
# top-{glue:text}`top_k_value`, the same random draws for both columns), in the style of the
# paper's Figure 6: agreement verbs in bold, verbs whose number steering inverted highlighted.

# %%
html = plots.generation_boxes_html(summary, n_display=n_display,
                                   seed=generation_seed)
display(HTML(html))

# %% [markdown]
# ### Under the paper's sampling, and beyond the four verbs
#
# The paper generates by sampling (temperature 1, top-k 50) and says the effect reaches words
# other than *is/are/was/were*. Each steering prompt is continued {glue:text}`n_samples_value`
# times by sampling, unsteered and steered, with the same random draws for both. A step counts
# as a decision when the clean pass's most likely token is a number word, and as inverted when
# the emitted token is the other number's form; the unsteered samples give the rate that
# sampling alone produces. The other number-marked words counted are
# {glue:text}`other_words_text`.

# %%
display(sva.sampling_table(summary))

# %% [markdown]
# ### The flip on single prompts
#
# The paper quotes one prompt: flipping the core on "The key next to the cabinets" drives
# $\mathbb P(\textit{is})$ from {glue:text}`paper_is_base` to {glue:text}`paper_is_flip` and
# $\mathbb P(\textit{are})$ from {glue:text}`paper_are_base` to {glue:text}`paper_are_flip` (in
# one of its models). The same prompts with our models, probabilities over the whole vocabulary:

# %%
display(sva.flip_demo_table(summary))

# %% [markdown]
# ## The paper's claims
#
# This chapter's rows of the [claims page](claims.ipynb). The paper's models cannot be loaded here,
# so every claim is "measured at reduced settings": on other, smaller models.

# %%
display(chapter_frame("subject_verb_agreement"))

# %% [markdown]
# ## Exercises
#
# ```{exercise} The AUC from scratch
# :label: sva-ex-auc
#
# The AUC of a score is the probability that a random positive example scores higher than a
# random negative one, ties counting one half. Write `my_auc(scores, positive)` by comparing all
# pairs, and check it against `corelib.experiments.sva.auc` on random scores with ties. What is
# the AUC of $-f$ if $f$ has AUC $a$?
# ```
#
# ````{solution} sva-ex-auc
# :class: dropdown
#
# ```python
# import numpy as np
# from corelib.experiments.sva import auc
#
# def my_auc(scores, positive):
#     s, y = np.asarray(scores, float), np.asarray(positive, bool)
#     diff = s[y][:, None] - s[~y][None, :]
#     return float((diff > 0).mean() + 0.5 * (diff == 0).mean())
#
# rng = np.random.default_rng(0)
# s, y = rng.integers(0, 5, 200), rng.integers(0, 2, 200)
# print(my_auc(s, y), auc(s, y))           # equal
# print(auc(-s, y), 1 - auc(s, y))         # equal: negating the score gives 1 - a
# ```
#
# A flipped core that *inverts* agreement therefore gives an AUC near 0, not 0.5; an AUC near
# 0.5 means the margin no longer carries the number at all.
# ````
#
# ```{exercise} Why "remove" lands below chance
# :label: sva-ex-remove
#
# Removal sets the core coordinate of every prompt to that of the training mean
# $\boldsymbol\mu$. If the margin were an exact affine function of the core coordinate, what AUC
# would removal give? The measured AUCs are below 0.5. What does that tell you?
# ```
#
# ```{solution} sva-ex-remove
# :class: dropdown
#
# With the margin a function of the coordinate alone, every prompt would get the same margin
# after removal and the AUC would be exactly 0.5 (all ties). Below 0.5 means the rest of the
# residual stream still carries some number information *with the opposite sign*: the attractor
# noun, which always has the other number, pulls the margin its way once the subject's number is
# gone. That is exactly the agreement-attraction error that the prompts were designed to provoke.
# ```
#
# ```{exercise} One backward pass or many
# :label: sva-ex-jacobians
#
# `corelib.experiments.sva.all_layer_jacobians` gets every layer's Jacobian from one backward
# pass. Using the tiny random model (`corelib.lm.load_model("tiny-random-llama")`), check that it
# agrees with `one_pass=False` (one pass per layer) and with a finite difference of the margin
# (central, step $10^{-3}$) along a random unit direction at layer 0. Why is the summed
# margin's gradient each prompt's own Jacobian?
# ```
#
# ````{solution} sva-ex-jacobians
# :class: dropdown
#
# ```python
# import torch
# from corelib.lm import load_model
# from corelib.models import resid_hook
# from corelib.experiments.sva import all_layer_jacobians
# from corelib.tasks.sva import AGREEMENT_READOUT, make_dataset
#
# lm = load_model("tiny-random-llama", readout=AGREEMENT_READOUT)
# batch = lm.tokenize(list(make_dataset(10).prompts[:6]))
# cache = lm.prefix_cache(batch)
# _, jac, m = all_layer_jacobians(lm, batch, [0, 1], cache)
# _, jac2, _ = all_layer_jacobians(lm, batch, [0, 1], cache, one_pass=False)
# print(max((jac[l] - jac2[l]).abs().max().item() for l in (0, 1)))   # ~0
#
# v = torch.randn(lm.d_model)
# v /= v.norm()
# def nudged(t):                      # margin with h_0 moved by t v at the last token
#     def fn(act, hook):
#         out = act.clone(); out[:, -1] += t * v; return out
#     with torch.no_grad():
#         return lm.last_token(batch, cache, fwd_hooks=[(resid_hook(0), fn)])
# central = (nudged(1e-3) - nudged(-1e-3)) / 2e-3
# print((central - jac[0] @ v).abs().max().item())                   # small
# ```
#
# Prompts in a batch never attend to each other, so prompt $j$'s margin does not depend on prompt
# $i$'s activations: $\partial(\sum_j f_j)/\partial \mathbf h_i = \partial f_i/\partial \mathbf h_i$.
# ````
