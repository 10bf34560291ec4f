# ---
# jupyter:
#   written_numbers:
#   - '(1: perfectly, 0.5: not at all, 0: inverted)'
#   - is taken with rank 1
#   - '(0° to 90°: the sign of a direction does not matter)'
#   - lowers a model's AUC by more than 0.05
#   - two random directions are within a few degrees of 90°
#   - lowers the AUC by at most 0.05
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
# # ACE on your own model
#
# ```{admonition} In this chapter
# :class: tip
#
# **You will be able to**
# - set up a new task for ACE on a pretrained language model (prompts, a read-out, hook
#   points) and extract a core at every layer with one call;
# - test a core on held-out prompts by keeping, removing and flipping it, and say what the
#   AUCs show: whether the core is sufficient, necessary, or only controls the behaviour;
# - tell a direction that *reads* a label (a probe, a steering vector) from one the model
#   *uses*, and predict which of them a removal test exposes;
# - run ACE on a plain Hugging Face model by naming one of its modules.
#
# **Before you start**: the chapters {doc}`ace_method` (what a core is) and
# {doc}`subject_verb_agreement` (the number margin, the keep / remove / flip tests at the last
# token, the AUC); projections onto a subspace, the angle between two vectors, logistic
# regression.
#
# **Time**: about {glue:text}`time_read` minutes to read, {glue:text}`time_total` with the exercises.
#
# **Computing it** on {glue:text}`cost_machine`: {glue:text}`cost_book` with the book's
# settings, {glue:text}`cost_paper` with the paper's (`--profile paper`).
# ```
#
# The previous chapters ran {term}`ACE` on the paper's models and tasks. This one is about using
# it on yours. It also shows what ACE tells you that the usual tools of interpretability do not.
# We will see three things.
#
# 1. **A new task in ten lines.** In SmolLM2-135M, ACE finds a one-dimensional {term}`core` of the
#    *tense* a sentence calls for, a task the paper does not study. {term}`Flipping <flip>` that
#    direction inverts the model's preference between past and present verbs. Unlike the agreement
#    core, though, it is not the whole of the behaviour. {term}`Kept <keep>` alone, it loses part of
#    the separation between past and present cues; {term}`removed <remove>`, it leaves part of it.
# 2. **Reading a label is not using it.** On the agreement task, in both offline models, we fit
#    the directions practitioners use: the difference of the class means (a steering vector), a
#    logistic-regression {term}`probe`, and the top principal component. We test each as we test a
#    core. A probe reads the subject's number well at every layer, a little better than the core.
#    But the model depends on the probe's direction less than on the core, and at early layers on
#    neither.
# 3. **Your own network.** The same call runs on a plain Hugging Face model, named by the path of
#    one of its modules.
#
# What ACE guarantees, and what it does not, runs through the chapter. ACE returns the
# directions along which the activations *vary on the data you give it* and to which the
# read-out is *sensitive* there (through its Jacobians). That makes its core the natural
# candidate for a direction the model uses, at that layer and position, on those prompts. The
# {term}`interventions <intervention>` then test the candidate. Nothing in the construction
# promises that keeping the core alone preserves the behaviour. Nor does it promise that the model
# has no other route to the behaviour, or that the core carries over to other prompts. The tense
# core shows that the first two can fail.

# %% tags=["parameters"]
# 1. tense: an offline name (corelib.lm.available_models()) or a hub name
tense_model = "smollm2-135m"  # the model of the tense task
n_phrases = 150          # noun phrases, each after both kinds of cue
tense_seed = 0           # draws of words and cues, shuffle and split
# 2. directions on the agreement task
models = ["smollm2-135m", "gemma3-270m"]  # the language models
n_per_number = 150       # agreement prompts per number (agreement: 600)
dataset_seed = 0         # draws of the agreement prompts and their split
layer_stride = 3         # sweep every layer_stride-th layer and the last
agreement_layer = None   # None: largest flip effect; or a layer index
probe_l2 = 0.01          # L2 penalty of the probe (unit-RMS features)
probe_l2_grid = [100.0, 1.0, 0.01, 0.0001]  # penalties of the table
n_examples = 4           # tense prompts whose verb odds are shown
batch_size = 100         # prompts per forward pass
eps = 1e-8               # relative jitter of the ACE square-root factors
# 3. your own network: a transformers model and the path of a module
hf_model = "tiny-random-llama"  # e.g. "gpt2" where a hub is reachable
hf_module = "model.layers.1"    # e.g. "transformer.h.6" for GPT-2
hf_phrases = 32          # tense phrases (half to fit, half to test)

# %% tags=["hide-input"]
from myst_nb import glue

from acebook.readability import chapter_time
from acebook.run_times import chapter_cost

cost = chapter_cost("own_model")
glue("cost_machine", cost.machine, display=False)
glue("cost_book", cost.book, display=False)
glue("cost_paper", cost.paper, display=False)
minutes = chapter_time("own_model")
glue("time_read", minutes.reading, display=False)
glue("time_total", minutes.total, display=False)

# %%
import matplotlib.pyplot as plt
import torch
from IPython.display import display
from myst_nb import glue

from corelib import claims, plots
from corelib.ace import Core, extract_from_model
from corelib.experiments import own_model
from corelib.experiments.subject_verb_agreement_layers import auc
from corelib.hooks import CoreHooks
from corelib.lm import TINY_MODEL, load_model
from corelib.targets import logit_difference
from corelib.tasks import tense

params = own_model.OwnModelParams.from_namespace(globals())

# %% [markdown]
# ## A new task in ten lines: tense
#
# A task for ACE needs three things: prompts, a **read-out** of the model's output that measures
# the behaviour, and a layer (or several) to look at. For tense, a time cue at the start of the
# prompt decides the tense of the verb that follows. "Yesterday, the key to the cabinets" calls
# for *was*; "Right now, the key to the cabinets" calls for *is*. The noun phrases are those of
# the agreement chapter, with singular and plural heads in equal numbers. So the read-out counts
# both numbers on each side:
#
# $$ f(\mathbf h) = (\ell_{\it was} + \ell_{\it were}) - (\ell_{\it is} + \ell_{\it are}). $$
#
# It is positive when the model prefers a past verb. The label is the cue's tense. The past cues
# are {glue:text}`past_cues`; the present cues are {glue:text}`present_cues`.
#
# Some cues are left out. After "Today" or "This year", both tenses read naturally. Past cues that
# SmolLM2 hardly reacts to on another draw of phrases ("Back then", "Once") are dropped too. We
# chose the cues after looking, so that the task measures a behaviour the model has. Every noun
# phrase appears once after a past and once after a present cue, and both versions land in the
# same half of the split (`corelib.tasks.tense`):

# %%
ds = tense.make_dataset(n_phrases, tense_seed)
display(own_model.tense_prompt_frame(ds))

# %% [markdown]
# ACE itself is one call of `corelib.ace.extract_from_model`. It takes the model, the hook points,
# the tokenised prompts and the read-out. Here the hook points are one per layer,
# `blocks.{l}.hook_resid_post`, the residual stream after layer $l$. The read-out is a function of
# the model's output: `corelib.targets.logit_difference` picks four logits at the last position.
# With a list of hooks, the call returns a core per hook, all from the same forward and backward
# passes. These are the lines the chapter runs, `corelib.experiments.own_model.tense_cores`:
#
# ```{literalinclude} /corelib/experiments/own_model.py
# :language: python
# :pyobject: tense_cores
# ```
#
# Load the model with `lm = load_model("smollm2-135m")` (`corelib.lm`, offline) and take the
# training half's prompts (`tense.make_dataset(n).split("train")`). Then `tense_cores(lm, prompts,
# range(lm.n_layers))` is the whole extraction: ten lines.
#
# The rest of the chapter's machinery is the test. On the {glue:text}`tense_n_test` held-out
# prompts, each layer's core is kept, removed or flipped at the last token, centred on the
# training mean as in the agreement chapter. The {term}`AUC` of the {term}`margin` then tells
# how well the model still separates past from present cues
# (1: perfectly, 0.5: not at all, 0: inverted). The chosen layer is the one whose flip lowers
# the AUC most.

# %%
summary = own_model.run(params)
claims.record(  # the chapter's findings, for the claims page
    "own_model", own_model.finding_values(summary),
    settings=claims.deviations(params, own_model.OwnModelParams()))

# %% tags=["hide-input"]
for name, value in own_model.glue_values(summary).items():
    glue(name, value, display=False)
# the cues are the task's definition, not a result: quoted as listed
for name, cues in (("past_cues", tense.PAST_CUES),
                   ("present_cues", tense.PRESENT_CUES)):
    quoted = ", ".join(f"“{c.rstrip(',')}”" for c in cues)
    glue(name, quoted, display=False)

# %% tags=["hide-input"]
fig = plots.figure_tense(summary)
glue("fig_tense", fig, display=False)
plt.close(fig)

# %% [markdown]
# ### What the tense core does
#
# One direction steers the tense, but it is not the whole of tense. Flipping the core at the
# chosen layer inverts the model's preference. Keeping the core alone, or removing it, shows that
# the model also uses something else.
#
# ```{glue:figure} fig_tense
# :name: fig-own-tense
#
# **A tense core in SmolLM2.** (A) AUC of the tense margin on held-out prompts with each layer's
# rank-1 core kept, removed or flipped at the last token. Dashed: the unmodified model; the
# vertical line marks the chosen layer. (B) The activity × relevance singular values at the chosen
# layer, relative to the first. (C) The held-out prompts' core coordinate against their margin, by
# the tense of their cue.
# ```
#
# Unmodified, {glue:text}`tense_model` separates past from present cues with AUC
# {glue:text}`tense_base:.3f`.
#
# The sweep covered {glue:text}`tense_n_swept` of its
# {glue:text}`tense_n_layers` layers, with cores fitted on {glue:text}`tense_n_train` prompts.
# Panel A shows where along the depth the cores matter; the chosen layer is
# {glue:text}`tense_layer`.
#
# The core is taken with rank 1, as for agreement, and the spectrum (B) says what that leaves out.
# Its {term}`gap <spectral gap>` $(\sigma_1/\sigma_2)^2$ is {glue:text}`tense_gap:.1f`. The first
# direction holds {glue:text}`tense_share:.0%` of the {term}`activity` × {term}`relevance` energy
# $\sum_k \sigma_k^2$.
#
# At the chosen layer, keeping only the core gives AUC {glue:text}`tense_keep:.3f`, removing it
# {glue:text}`tense_remove:.3f`, and flipping it {glue:text}`tense_flip:.3f`. The flip inverts the
# preferred tense {claim}`own.tense_flip_inverts <holds>`. More often than not, a prompt with a
# present cue now leans further towards the past than a prompt with a past cue. Panel C shows the
# margin rising with the core coordinate, which the flip reverses.
#
# Unlike the agreement core, which is sufficient and necessary for number, the tense core is
# neither for tense. Kept alone, it loses part of the separation
# {claim}`own.tense_keep_loses <holds>`. Removed, it leaves part of it
# {claim}`own.tense_remove_leaves <holds>`.
#
# Where does the rest of tense live? This chapter does not test it, and two answers are open. The
# first direction holds most but not all of the energy, so a rank-1 core may leave out part of what
# the read-out depends on. Or the cue may reach the verb's prediction through attention from the
# cue's own tokens in later layers, bypassing the last token's residual stream at the chosen layer.
#
# ### The core, saved and read back
#
# `run` saved the chosen core with `core.save(folder)`, and `Core.load` returns the same core
# (how it is stored: see the end of the chapter):

# %%
core = Core.load(own_model.tense_core_path(params))
print(f"rank {core.rank} of d = {core.dim} at", core.metadata["hook"])

# %% [markdown]
# The table gives the probabilities of the four verbs (over the whole vocabulary) after a few
# held-out prompts. Each prompt is shown unmodified and with the loaded core flipped at its layer:
# `core.hooks(hook, mode, centered=True, positions="last")` turns the core into that intervention.
# After "{glue:text}`ex_prompt`", for instance, *was* has probability
# {glue:text}`ex_was_base:.3f` and *is* {glue:text}`ex_is_base:.3f`. With the core flipped, they
# have {glue:text}`ex_was_flip:.3f` and {glue:text}`ex_is_flip:.3f`.

# %%
display(own_model.tense_examples_table(summary))

# %% [markdown]
# ## ACE beside steering vectors, probes and PCA
#
# A direction can read a label well and still matter little to the model. This section shows it
# on the agreement task, by setting the ACE core beside the directions practitioners usually take.
#
# Practitioners who look for "the direction of X" in a network usually take one of three
# directions. Each is fitted from activations $\mathbf h_i$, the first two also from a label $y_i$
# (here, on the agreement task: plural or singular head):
#
# - the **difference of class means** $\boldsymbol\mu_+ - \boldsymbol\mu_-$, the *steering
#   vector* added to activations to push a model towards a behaviour;
# - a **linear probe**: logistic regression of $y$ on $\mathbf h$, whose weight vector is the
#   direction it reads (L2 penalty $\lambda =$ {glue:text}`probe_l2`);
# - the **top principal component** of the activations, the direction in which they vary most.
#
# The ACE core is the fourth. The first three look only at the activations and the label. ACE
# also asks the model, through the Jacobians of the read-out, which directions the read-out is
# sensitive to. Each direction $\mathbf d$ becomes a rank-1 core with the training mean, so it
# can be kept, removed and flipped exactly as an ACE core is. All four are fitted on the
# {glue:text}`dir_n_train` training prompts of the agreement chapter's data set. On its
# {glue:text}`dir_n_test` held-out prompts we measure:
#
# - the **angle** to the ACE core (0° to 90°: the sign of a direction does not matter);
# - how well it **reads the label**: the AUC of the projection $\mathbf d^\top(\mathbf h -
#   \boldsymbol\mu)$ for plural against singular (each direction oriented on the training
#   half);
# - how much of the **margin's variance** the projection explains: the $R^2$ of the clean
#   margin regressed on it;
# - the AUC of the margin with the direction **kept, removed and flipped**, and how much the
#   removal lowers the AUC as a share of what removing the ACE core does. Unmodified, the models
#   reach AUC {glue:text}`dir_base_min:.3f` to {glue:text}`dir_base_max:.3f`.
#
# A probe and the ACE core are compared at every swept layer. All four directions are compared at
# one layer, the one where the ACE core's flip lowers the AUC most. That is the agreement
# chapter's rule; the table's column "layer" gives the layer it picks.

# %% tags=["hide-input"]
fig = plots.figure_directions(summary)
glue("fig_directions", fig, display=False)
plt.close(fig)

# %% [markdown]
# ### Readable everywhere, used only at the end
#
# A probe finds the subject's number at every layer. Yet flipping the probe's direction, or the
# ACE core, changes the model's preference only in the last layers. The top row of the figure
# shows both.
#
# ```{glue:figure} fig_directions
# :name: fig-own-directions
#
# **Reading the label is not using it.** Top row, by layer: how well a probe's direction reads the
# number of the held-out prompts (AUC, blue). Beside it, the AUC of the number margin with the
# probe's direction (dashed) or the ACE core (solid) removed (orange) or flipped (red). Dotted:
# the unmodified model; the vertical line marks the chosen layer. Bottom row, at the chosen layer,
# for each direction: the AUC of its projection for the label (blue), and of the margin with the
# direction removed (orange) and flipped (red). Dashed: the unmodified model. Under each
# direction, its angle to the ACE core.
# ```
#
# At every swept layer, a probe reads the number of the head noun from the last token's residual
# stream {claim}`own.probe_reads_everywhere <holds>`. At the worst layer its AUC is still
# {glue:text}`sweep_probe_read_min:.3f`.
#
# In the first {glue:text}`early_depth:.0%` of the layers, however, the model's preference hardly
# depends on these directions. Removing the probe's direction leaves the AUC at
# {glue:text}`early_probe_remove_min:.3f` or more, and flipping it at
# {glue:text}`early_probe_flip_min:.3f` or more. Flipping the ACE cores of those layers leaves it
# at {glue:text}`early_ace_flip_min:.3f` or more. No flip there lowers a model's AUC by more than
# 0.05 {claim}`own.early_flips_small <holds>`.
#
# Only in the last layers does flipping one of these directions change the model's preference. A
# probe sweep alone would have placed the number "everywhere". Why does the last token's copy of
# the number matter so little at the early layers? This chapter does not test it. One possibility
# is that later layers read the number again from the subject's own position, through attention.
#
# ### At the chosen layer, the directions read alike
#
# Three of the four directions read the number well. The two that are not the core lie much
# closer to it than a random direction would. The table gives every measure for each direction
# and model; the figure's bottom row draws the AUCs.

# %%
display(own_model.directions_table(summary))

# %% [markdown]
# Every direction but the top principal component reads the number of the held-out prompts well.
# The AUC is {glue:text}`ace_read_auc_min:.3f` to {glue:text}`ace_read_auc_max:.3f` for the ACE
# core and {glue:text}`md_read_auc_min:.3f` to {glue:text}`md_read_auc_max:.3f` for the mean
# difference.
#
# The probe reads it best, with AUC {glue:text}`probe_read_auc_min:.3f` to
# {glue:text}`probe_read_auc_max:.3f`, but only by a small lead
# {claim}`own.probe_reads_best <holds>`. A lead this small may not survive another draw of
# prompts; the exercise {ref}`own-ex-rerun` tries one.
#
# The mean difference is the direction closest to the core {claim}`own.md_closest <holds>`. It
# lies {glue:text}`md_angle_to_ace_min:.0f`° to {glue:text}`md_angle_to_ace_max:.0f`° from the
# core; the probe lies {glue:text}`probe_angle_to_ace_min:.0f` to
# {glue:text}`probe_angle_to_ace_max:.0f`° from it. In hundreds of dimensions two random directions
# are within a few degrees of 90°. So these are strong alignments, though not the same direction.
#
# ```{admonition} Details: why "kept" repeats "reads the label" at a last layer
# :class: dropdown
#
# At a model's last layer, keeping one direction alone leaves the margin a function of the
# coordinate along it. So wherever the table's layer is the last, the column "kept" repeats the
# column "reads the label".
# ```
#
# ### Only the interventions tell them apart
#
# Directions that read the number alike do not matter alike to the model. Removing or flipping the
# ACE core moves the margin most. The probe's direction matters less, and the top principal
# component hardly at all.
#
# Kept alone, the ACE core separates the prompts at least as well as the unmodified model
# {claim}`own.ace_keep_sufficient <holds>`. Removed, it leaves an AUC of at most
# {glue:text}`ace_remove_max:.3f`; flipped, at most {glue:text}`ace_flip_max:.3f`. Removing any
# other direction lowers the AUC less {claim}`own.ace_remove_largest <holds>`. So does flipping
# any other direction {claim}`own.ace_flip_largest <holds>`. How far the core leads differs
# between the models.
#
# The mean difference is a weaker handle. Removed, it leaves AUC {glue:text}`md_remove_min:.3f`
# to {glue:text}`md_remove_max:.3f`; flipped, {glue:text}`md_flip_min:.3f` to
# {glue:text}`md_flip_max:.3f`. It lies close to the core but not along it. Is the rest of it made
# of directions the read-out ignores? The chapter does not test that.
#
# The probe reads the label with test accuracy at least {glue:text}`probe_acc_min:.1%`. Yet the
# model depends on its direction less than on the core {claim}`own.probe_remove_share <holds>`.
# How much less differs a lot between the models: removing it costs
# {glue:text}`probe_share_min:.0%` to {glue:text}`probe_share_max:.0%` of what removing the core
# costs.
#
# The probe's projection still explains much of the margin's variance. Its $R^2$ is
# {glue:text}`probe_r2_min:.2f` to {glue:text}`probe_r2_max:.2f`, against
# {glue:text}`ace_r2_min:.2f` to {glue:text}`ace_r2_max:.2f` for the core. On these prompts the
# projection follows the label, and so does the margin, so the two follow each other. A
# correlation cannot tell a direction the model reads from one that merely goes along with it; an
# intervention can.
#
# The top principal component reads the label poorly, with AUC {glue:text}`pc_read_auc_min:.3f`
# to {glue:text}`pc_read_auc_max:.3f`. It hardly matters to the margin: removing it costs at most
# {glue:text}`pc_share_max:.0%` of what removing the core costs
# {claim}`own.pc_remove_share <holds>`. The direction in which the activations vary most is not
# the task's, as the paper expects of complex models.
#
# ### A probe's direction depends on its penalty
#
# The penalty of a probe changes which direction it finds, but not how much the model uses it. A
# strong penalty turns the probe into the mean difference. A weak one is fitted to tell the
# classes apart as well as it can, and the model does not depend on it more.
#
# A probe answers "is the information *there*?". The number of the head noun is there along
# several directions, as the table above shows. A lightly penalised probe finds the one along which
# the two classes are easiest to tell apart, not the one the model reads. The next table gives the
# probe fitted with every penalty of a grid.

# %%
display(own_model.probe_table(summary))

# %% [markdown]
# As the penalty grows, the probe turns into the mean difference. At $\lambda =$
# {glue:text}`grid_strong_l2:g` it lies within {glue:text}`grid_strong_angle_md:.1f`° of it
# {claim}`own.strong_probe_is_md <holds>`. Removing it then gives AUC
# {glue:text}`grid_strong_remove_min:.3f` to {glue:text}`grid_strong_remove_max:.3f`.
#
# A weak penalty ($\lambda =$ {glue:text}`grid_weak_l2:g`) reads the label with AUC at least
# {glue:text}`grid_weak_read_min:.3f`. The model does not depend on it more
# {claim}`own.weak_probe_not_used_more <holds>`: removing it gives
# {glue:text}`grid_weak_remove_min:.3f` to {glue:text}`grid_weak_remove_max:.3f`.
#
# ```{admonition} Details: why a strong penalty gives the mean difference
# :class: dropdown
#
# As $\lambda \to \infty$ the weights shrink towards zero. There they point along minus the
# gradient of the loss at zero weights, and that gradient points along $\boldsymbol\mu_+ -
# \boldsymbol\mu_-$.
# ```
#
# ### What this says about ACE
#
# ACE needs no label. The read-out's Jacobians say to which directions the margin is sensitive,
# and the activations say along which of those the prompts actually differ. What ACE guarantees is
# this: on the prompts it was given and to first order, its core holds the directions that are
# both active and move the read-out. The interventions then test whether the model relies on them.
#
# On agreement, the test confirms the core with a margin over every other direction. On tense, it
# confirms that the core controls the preferred tense, not that it is all of it. A probe that reads
# the label is not, for that, a direction the model uses. It is not even a candidate in ACE's
# sense: it is fitted to the label, and a direction that reads the label well can be one the
# read-out ignores. The exercise "Reading without using" below shows why.
#
# ## Your own network
#
# `extract_from_model` takes any PyTorch module: a hook point of a TransformerLens-style model,
# as above, or the path of a submodule of a plain model, whose output (or its first element)
# is the activation. For GPT-2 from the Hugging Face hub, the output of its seventh block:
#
# ```python
# from transformers import AutoModelForCausalLM, AutoTokenizer
#
# hf = AutoModelForCausalLM.from_pretrained("gpt2")
# tokenizer = AutoTokenizer.from_pretrained("gpt2")
# module = "transformer.h.6"  # hf.named_modules() lists every path
# ```
#
# The cells below run the same steps on the model named by the parameters `hf_model` and
# `hf_module`. No hub is reachable where this book is built. So here they run on a 2-layer Llama
# with random weights built in code, whose AUCs say nothing about tense. With a network,
# `ace-book run own_model -p hf_model gpt2 -p hf_module transformer.h.6` runs GPT-2. Offline,
# `-p hf_model smollm2-135m -p hf_module model.layers.27` runs SmolLM2. `load_model` returns our
# wrapper; its `.hf` is the `transformers` model itself, what `from_pretrained` returns.

# %%
# the built-in tiny model takes its tokenizer's words from the task
words = tense.vocabulary() if hf_model == TINY_MODEL else None
lm = load_model(hf_model, vocabulary=words)  # a hub name: transformers
hf, tokenizer = lm.hf, lm.tokenizer  # the plain transformers objects
own = tense.make_dataset(hf_phrases, tense_seed)
train, _ = own.split("train")
test, past = own.split("test")
# the read-out: a function of the model's output (it reads .logits)
margin = logit_difference(tokenizer, [" was", " were"], [" is", " are"])

# %% [markdown]
# `own_model.padded_inputs` tokenises the prompts and pads them on the left. It passes position
# ids that count real tokens only, so every prompt ends at the last position and padding changes
# nothing. The last position is where `extract_from_model` reads by default (`positions="last"`):

# %%
inputs = own_model.padded_inputs(tokenizer, train)
own_core = extract_from_model(hf, hf_module, inputs, margin, rank=1)
gap = own_core.spectral_gap
print(f"rank {own_core.rank} of {own_core.dim}, (s1/s2)^2 = {gap:.3g}")

# %% [markdown]
# The core's hooks apply to the same module of the plain model (`hooks(...).on(hf)`), here
# centred on the training mean and at the last token only, as everywhere in this chapter:

# %%
held_out = own_model.padded_inputs(tokenizer, test)
held_out = {k: v.to(hf.device) for k, v in held_out.items()}


def tense_auc(hooks=()):
    with CoreHooks(hooks).on(hf), torch.no_grad():
        return auc(margin(hf(**held_out)).cpu(), past)


aucs = {"unmodified": tense_auc()}
for mode in ("keep", "remove", "flip"):
    hooks = own_core.hooks(hf_module, mode, centered=True,
                           positions="last")
    aucs[mode] = tense_auc(hooks)
print(", ".join(f"{k}: AUC {v:.3f}" for k, v in aucs.items()))

# %% [markdown]
# ## Summary
#
# - **A new task.** On SmolLM2's tense margin, ACE finds a rank-1 core at layer
#   {glue:text}`tense_layer` whose flip inverts the preferred tense
#   {claim}`own.tense_flip_inverts <holds>`. Unlike the agreement core, it is not sufficient for
#   the behaviour {claim}`own.tense_keep_loses <holds>`, and not necessary either
#   {claim}`own.tense_remove_leaves <holds>`.
# - **Reading is not using.** A probe reads the subject's number at every swept layer
#   {claim}`own.probe_reads_everywhere <holds>`. But in the first {glue:text}`early_depth:.0%` of
#   the layers, flipping its direction, or the ACE core, lowers the AUC by at most 0.05
#   {claim}`own.early_flips_small <holds>`.
# - **At the chosen layer, the core is the handle.** Kept alone, the ACE core separates the
#   prompts at least as well as the whole model {claim}`own.ace_keep_sufficient <holds>`. No other
#   direction moves the margin as much when removed {claim}`own.ace_remove_largest <holds>` or
#   flipped {claim}`own.ace_flip_largest <holds>`.
# - **The other directions.** The mean difference is the direction closest to the core
#   {claim}`own.md_closest <holds>`. The probe reads the label best, by a small lead
#   {claim}`own.probe_reads_best <holds>`. Yet the model depends on the probe's direction less than
#   on the core {claim}`own.probe_remove_share <holds>`; how much less differs between the two
#   models. The top principal component hardly matters {claim}`own.pc_remove_share <holds>`.
#
# **What reproduces.** The paper has no such experiment, but two of its statements are tested here
# beyond its own tasks. The agreement core is sufficient, and removing or flipping it moves the
# margin more than any of the other three directions. And the direction of largest
# variance is not the task's, as the paper expects of complex models.
#
# **What differs.** One could read the paper's "certifying causal relevance" as "the core is the
# mechanism". The tense core does not bear that reading out: it controls the behaviour without
# being all of it. Why is open. A rank-1 core may leave part of the energy out, or the cue may
# reach the verb through attention from its own tokens; neither is tested here.
#
# **What is open.** Every number comes from one draw of prompts per task, in small models. So how
# much the smaller leads move between draws is not known beyond the rerun exercise. Those are the
# probe's reading lead and the flip margin in one model. Where the rest of tense lives (a second
# direction, another position) is not tested either.
#
# ## How this chapter computes
#
# - **Stored results.** `own_model.run` computes the tense analysis and each model's comparison
#   of directions once. It stores each in a results folder keyed by the parameters it depends on
#   (`own_model_tense/`, `own_model_directions/`). Rebuilding the book reads them back, and every
#   file read back is checked against the SHA-256 recorded when it was written.
# - **The saved core.** The chosen tense core is saved with `core.save(folder)` in
#   {glue:text}`tense_core_folder` of the results folder. Its arrays are in safetensors and its
#   metadata in JSON, each with its SHA-256, so a changed byte is an error when `Core.load` reads
#   it. The example table is computed with the core read back from there.
# - **Interventions.** They re-run only the last token from the intervened layer on, on top of the
#   key-value cache of the prompt's other tokens
#   (`corelib.experiments.subject_verb_agreement.prefix_batches`). The tests check that this gives
#   the margins of whole forward passes.
# - **Jacobians and the probe.** One backward pass per batch gives the read-out's Jacobians at
#   every swept layer. The probe is fitted by Newton's method in float64, on activations centred
#   and scaled to unit root mean square (`own_model.fit_probe`).
# - **Models.** The two language models load offline from 4-bit GGUF files. They are de-quantised
#   once into `~/.cache/corelib/models`, which makes a first run slower.

# %% [markdown]
# ## Exercises
#
# Difficulty 🔴 (of 🔴🔴🔴🔴🔴) and importance 🔵 (of 🔵🔵🔵🔵🔵) follow the conventions of the
# ARENA course. A coding exercise gives a stub; fill it in and run the check below it, which
# calls your function on random and edge cases, compares it with the library, and says what is
# wrong.
#
# ```{exercise} The read-out
# :label: own-ex-margin
#
# 🔴⚪⚪⚪⚪ · 🔵🔵🔵⚪⚪ · about 10 minutes
#
# Write `logit_margin(logits, plus, minus)`. It takes logits of shape (batch, positions,
# vocabulary) and two lists of token ids. It returns the sum of the `plus` logits minus the sum of
# the `minus` logits, at the position that predicts the next word: one number per prompt, as
# `corelib.targets.logit_difference` does. Then say when it equals the difference of the tokens'
# log-probabilities.
#
# **Expected result**: the check prints "all 5 cases pass"; the two agree when both sides have
# as many tokens.
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# The position that predicts the next word is the last one, `logits[:, -1]`. A log-probability
# is the logit minus $\log \sum_k e^{\ell_k}$; how many times does that term appear on each side?
# ```

# %%
from corelib.exercises import own_model as ex


def logit_margin(logits, plus, minus):
    """sum(logits[plus]) - sum(logits[minus]) at the last position."""
    raise NotImplementedError  # your code here


ex.check_logit_margin(logit_margin);

# %% [markdown]
# ````{solution} own-ex-margin
# :class: dropdown
#
# ```{include} ../solutions/own_model.md
# :start-after: <!-- own-ex-margin -->
# :end-before: <!-- end own-ex-margin -->
# ```
# ````
#
# ```{exercise} The AUC of a margin
# :label: own-ex-auc
#
# 🔴🔴⚪⚪⚪ · 🔵🔵🔵🔵⚪ · about 15 minutes
#
# Every test in this chapter is an AUC. Write `margin_auc(scores, positive)`: the probability
# that a randomly chosen positive example scores higher than a randomly chosen negative one,
# ties counted one half. Compare it with `corelib.experiments.subject_verb_agreement.auc`, which
# the check uses.
# Why does an AUC, unlike an accuracy, need no threshold on the margin?
#
# **Expected result**: 1 for perfectly separated scores, 0 for inverted ones, 0.5 when every
# score is tied; the check prints "all 7 cases pass".
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# Form the matrix of differences between every positive score and every negative score
# (broadcasting), and average `(diff > 0) + 0.5 * (diff == 0)`.
# ```

# %%
def margin_auc(scores, positive):
    """P(score of a positive > score of a negative), ties 1/2."""
    raise NotImplementedError  # your code here


ex.check_margin_auc(margin_auc);

# %% [markdown]
# ````{solution} own-ex-auc
# :class: dropdown
#
# ```{include} ../solutions/own_model.md
# :start-after: <!-- own-ex-auc -->
# :end-before: <!-- end own-ex-auc -->
# ```
# ````
#
# ```{exercise} How far is a steering vector from a core?
# :label: own-ex-angle
#
# 🔴🔴⚪⚪⚪ · 🔵🔵🔵⚪⚪ · about 15 minutes
#
# Write `core_angle(v, basis)`. It returns the angle in degrees between a vector $\mathbf v$ and
# the subspace spanned by the orthonormal columns of `basis`: the smallest principal angle. Think
# of $\mathbf v$ as a steering vector, of any length and sign, and of `basis` as a core of rank
# $r$. Then estimate how far from 90° two random directions in SmolLM2's 576 dimensions typically
# are, and use it to read the chapter's angles.
#
# **Expected result**: 0° for a vector inside the core, 90° for one orthogonal to it, 45° for
# the diagonal of the plane against its first axis; the check prints "all 6 cases pass". Two
# random directions in 576 dimensions are typically within about 2.4° of 90°.
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# The cosine of the angle is the length of the projection of $\mathbf v$ onto the core,
# $\lVert \mathbf Q^\top \mathbf v \rVert$, divided by $\lVert \mathbf v \rVert$. For the second
# part: the cosine of two random unit vectors in $D$ dimensions has standard deviation
# $1/\sqrt D$.
# ```

# %%
def core_angle(v, basis):
    """Angle in degrees between v and the span of basis's columns."""
    raise NotImplementedError  # your code here


ex.check_core_angle(core_angle);

# %% [markdown]
# ````{solution} own-ex-angle
# :class: dropdown
#
# ```{include} ../solutions/own_model.md
# :start-after: <!-- own-ex-angle -->
# :end-before: <!-- end own-ex-angle -->
# ```
# ````
#
# ```{exercise} Keep, remove, flip
# :label: own-ex-intervene
#
# 🔴🔴⚪⚪⚪ · 🔵🔵🔵🔵⚪ · about 15 minutes
#
# Write `intervene(h, basis, mean, mode)`, the chapter's three interventions on activations `h`
# (one row per prompt). They are centred on the training mean $\boldsymbol\mu$. `"keep"` keeps
# the mean plus the part of $\mathbf h - \boldsymbol\mu$ along the core; `"remove"` takes that
# part away; `"flip"` reverses it. What does flipping twice give?
#
# **Expected result**: the check prints "all 7 cases pass"; flipping twice gives back
# $\mathbf h$.
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# With $\mathbf P = \mathbf Q \mathbf Q^\top$ the projector onto the core, the part along it
# is $\mathbf P(\mathbf h - \boldsymbol\mu)$; for rows of `h`, `(h - mean) @ basis @ basis.T`.
# ```

# %%
def intervene(h, basis, mean, mode):
    """h with the core part kept, removed or flipped (centred)."""
    raise NotImplementedError  # your code here


ex.check_intervene(intervene);

# %% [markdown]
# ````{solution} own-ex-intervene
# :class: dropdown
#
# ```{include} ../solutions/own_model.md
# :start-after: <!-- own-ex-intervene -->
# :end-before: <!-- end own-ex-intervene -->
# ```
# ````
#
# ```{exercise} Reading without using
# :label: own-ex-unused
#
# 🔴🔴🔴⚪⚪ · 🔵🔵🔵🔵🔵 · about 15 minutes, pen and paper
#
# Near the activations, the margin is $f(\mathbf h) \approx f(\boldsymbol\mu) + \mathbf
# g^\top(\mathbf h - \boldsymbol\mu)$ with $\mathbf g = \nabla f$. By how much does removing a
# unit direction $\mathbf d$ (centred) change a prompt's margin? Which directions can be removed
# without changing any margin, however well they read the label? What, then, does ACE's core
# guarantee, and what does it not?
#
# **Expected result**: the change is $-(\mathbf g^\top\mathbf d)\,\mathbf d^\top(\mathbf h -
# \boldsymbol\mu)$; every direction orthogonal to $\mathbf g$ can be removed without effect.
# ```
#
# ````{solution} own-ex-unused
# :class: dropdown
#
# ```{include} ../solutions/own_model.md
# :start-after: <!-- own-ex-unused -->
# :end-before: <!-- end own-ex-unused -->
# ```
# ````
#
# ```{exercise} Probes follow the covariance, mean differences do not
# :label: own-ex-probe
#
# 🔴🔴🔴⚪⚪ · 🔵🔵🔵⚪⚪ · about 25 minutes
#
# Draw two Gaussian classes in $d = 20$ dimensions, $N = 20\,000$ points each, with means
# $\pm\boldsymbol\delta/2$ and the same covariance $\Sigma$. With $\Sigma = I$, compare the
# directions of `own_model.mean_difference` and of `own_model.fit_probe` (penalty $10^{-4}$).
# Then stretch $\Sigma$ to variances $1, 2, \dots, 20$ (diagonal) with $\boldsymbol\delta$ the
# vector of ones: which direction does the weakly penalised probe approach, and what happens to
# it with penalty $10^{3}$? Use `own_model.angle_deg`.
#
# **Expected result**: with $\Sigma = I$ the two directions are a few degrees apart; with the
# stretched $\Sigma$ the weak probe lies within 3° of $\Sigma^{-1}\boldsymbol\delta$, about 50°
# from $\boldsymbol\delta$, and the strong probe within 0.5° of the mean difference.
# ```
#
# ```{admonition} Hint
# :class: dropdown
#
# For two Gaussian classes with one covariance, the Bayes-optimal boundary (Fisher's linear
# discriminant) is orthogonal to $\Sigma^{-1}\boldsymbol\delta$. A weakly penalised logistic
# regression approaches it.
# ```
#
# ````{solution} own-ex-probe
# :class: dropdown
#
# ```{include} ../solutions/own_model.md
# :start-after: <!-- own-ex-probe -->
# :end-before: <!-- end own-ex-probe -->
# ```
# ````
#
# ```{exercise} Another draw of prompts
# :label: own-ex-rerun
#
# 🔴⚪⚪⚪⚪ · 🔵🔵🔵🔵⚪ · about 15 minutes, 3 to 10 of them waiting
#
# The chapter's findings rest on one draw of prompts. Rerun it on SmolLM2 alone, with new draws
# of both data sets:
# `ace-book run own_model -p tense_seed 1 -p dataset_seed 1 -p models "[smollm2-135m]"`.
# Which findings of the Summary keep their status? The verdicts of the executed chapter, or the
# claims page, show them. How far do the numbers of the two tables move?
#
# We measured the run with `/usr/bin/time` and `OMP_NUM_THREADS=1`. It took 142 s of CPU time on
# one core of an AMD EPYC, with SmolLM2 already de-quantised by an earlier run. That is about
# 2½ minutes on a free core; on our machine, shared with other jobs, it took 9½ minutes.
#
# **Expected result**: every finding of the Summary keeps the status "holds". The agreement
# layer chosen by the flip moves (to 28 of 30 on our run). The probe now reads the label
# perfectly (AUC 1.000, against 0.938 for the core). Removing its direction still costs less
# than a fifth of what removing the core costs.
# ```
#
# ````{solution} own-ex-rerun
# :class: dropdown
#
# ```{include} ../solutions/own_model.md
# :start-after: <!-- own-ex-rerun -->
# :end-before: <!-- end own-ex-rerun -->
# ```
# ````
