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
# # ACE on your own model
#
# The previous chapters ran ACE on the paper's models and tasks. This one is about using it on
# yours, and about what it adds to the tools interpretability practitioners already reach for.
#
# 1. **A new task in ten lines.** On SmolLM2-135M, ACE finds the direction that carries the
#    *tense* a sentence calls for, a task the paper does not study: a layer sweep from one call,
#    the core's spectrum, and the keep / remove / flip tests of the agreement chapter. The core
#    is saved to disk and read back.
# 2. **ACE beside steering vectors, probes and PCA.** On the agreement task, in both offline
#    models, we fit the difference of class means, a logistic-regression probe and the top
#    principal component, and ask of each what we ask of a core: does the model *use* it?
# 3. **Your own network.** The same call on a plain Hugging Face model, named by the path of
#    one of its modules.
#
# {glue:text}`cost`

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

from acebook.run_times import cost_sentence

glue("cost", cost_sentence("own_model"), display=False)

# %%
import matplotlib.pyplot as plt
import torch
from IPython.display import display
from myst_nb import glue

from corelib import plots
from corelib.ace import Core, CoreHooks, extract_from_model
from corelib.experiments import own_model
from corelib.experiments.sva import auc
from corelib.lm import load_model
from corelib.targets import logit_difference
from corelib.tasks import tense

params = own_model.OwnModelParams.from_namespace(globals())

# %% [markdown]
# ## A new task in ten lines: tense
#
# A task for ACE needs three things: prompts, a **read-out** of the model's output that measures
# the behaviour, and a layer (or several) to look at. For tense, a time cue at the start of the
# prompt decides whether the verb that follows should be in the past or the present:
# "Yesterday, the key to the cabinets" calls for *was*, "Right now, the key to the cabinets" for
# *is*. The noun phrases are those of the agreement chapter, singular and plural heads in equal
# numbers, so the read-out counts both numbers on each side:
#
# $$ f(\mathbf h) = (\ell_{\it was} + \ell_{\it were}) - (\ell_{\it is} + \ell_{\it are}), $$
#
# positive when the model prefers a past verb. The label is the cue's tense. The past cues are
# {glue:text}`past_cues`; the present cues {glue:text}`present_cues`. Cues after which both
# tenses read naturally, such as "Today" or "This year", are left out, and so are past cues
# that SmolLM2 hardly reacts to on another draw of phrases ("Back then", "Once"): we chose the
# cues after looking, so that the task measures a behaviour the model has. Every noun phrase appears
# once after a past and once after a present cue, and both versions land in the same half of
# the split (`corelib.tasks.tense`):

# %%
ds = tense.make_dataset(n_phrases, tense_seed)
display(own_model.tense_prompt_frame(ds))

# %% [markdown]
# ACE itself is one call of `corelib.ace.extract_from_model`: the model, the hook points (one
# per layer here, `blocks.{l}.hook_resid_post`, the residual stream after layer $l$), the
# tokenised prompts, and the read-out as a function of the model's output
# (`corelib.targets.logit_difference` picks four logits at the last position). With a list of
# hooks it returns a core per hook, all from the same forward and backward passes. These are the
# lines the chapter runs, `corelib.experiments.own_model.tense_cores`:
#
# ```{literalinclude} /corelib/experiments/own_model.py
# :language: python
# :pyobject: tense_cores
# ```
#
# With `lm = load_model("smollm2-135m")` (`corelib.lm`, offline) and the training half's
# prompts (`tense.make_dataset(n).split("train")`), `tense_cores(lm, prompts,
# range(lm.n_layers))` is the whole extraction: ten lines. The rest of
# the chapter's machinery is the test: on the {glue:text}`tense_n_test` held-out prompts, each
# layer's core is kept, removed or flipped at the last token, centred on the training mean as in
# the agreement chapter, and the AUC of the margin tells how well it still separates past from
# present cues (1: perfectly, 0.5: not at all, 0: inverted). The chosen layer is the one whose
# flip lowers the AUC most.

# %%
summary = own_model.run(params)

# %% tags=["hide-input"]
for name, value in own_model.glue_values(summary).items():
    glue(name, value, display=False)

# %% tags=["hide-input"]
fig = plots.figure_tense(summary)
glue("fig_tense", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_tense
# :name: fig-own-tense
#
# **A tense core in SmolLM2.** (A) AUC of the tense margin on held-out prompts with each layer's
# rank-1 core kept, removed or flipped at the last token (dashed: the unmodified model; the
# vertical line marks the chosen layer). (B) The activity × relevance singular values at the
# chosen layer, relative to the first. (C) The held-out prompts' core coordinate against their
# margin, by the tense of their cue.
# ```
#
# Unmodified, {glue:text}`tense_model` separates past from present cues with AUC
# {glue:text}`tense_base:.3f`. The sweep covered {glue:text}`tense_n_swept` of its
# {glue:text}`tense_n_layers` layers, with cores fitted on {glue:text}`tense_n_train` prompts.
# As for agreement, the cores of the last layers matter most; the chosen layer is
# {glue:text}`tense_layer`. Its spectrum (B) has a gap $(\sigma_1/\sigma_2)^2$ of
# {glue:text}`tense_gap:.1f`, and the first direction holds {glue:text}`tense_share:.0%` of the
# activity × relevance energy $\sum_k \sigma_k^2$, so the core is taken with rank 1. At that
# layer, keeping only the core gives AUC {glue:text}`tense_keep:.3f`, removing it
# {glue:text}`tense_remove:.3f`, and flipping it {glue:text}`tense_flip:.3f`.
#
# Tense is a weaker behaviour of this small model than agreement, and its core is less complete
# than the agreement core: keeping the core alone loses part of the separation, and removing it
# leaves part of it. Flipping the one direction, however, does more than remove the tense: the
# AUC falls below one half, so the model now tends to prefer the present after a past cue and
# the past after a present cue (panel C shows why: the margin follows the core coordinate).
#
# ### Saving the core and reading it back
#
# `run` saved the chosen core with `core.save(folder)`, in the folder
# {glue:text}`tense_core_folder` of the results folder: its arrays in safetensors, its
# metadata in JSON, each recorded with its SHA-256, so a changed byte is an error when it is
# read back. `Core.load` returns the same core:

# %%
core = Core.load(own_model.tense_core_path(params))
print(f"rank {core.rank} of d = {core.dim} at", core.metadata["hook"])

# %% [markdown]
# `core.hooks(hook, mode, centered=True, positions="last")` turns it into an intervention on
# the model again. The table gives the probabilities of the four verbs (over the whole
# vocabulary) after a few held-out prompts, unmodified and with the loaded core flipped at its
# layer. After "{glue:text}`ex_prompt`", for instance, *was* has probability
# {glue:text}`ex_was_base:.3f` and *is* {glue:text}`ex_is_base:.3f`; with the core flipped,
# {glue:text}`ex_was_flip:.3f` and {glue:text}`ex_is_flip:.3f`.

# %%
display(own_model.tense_examples_table(summary))

# %% [markdown]
# ## ACE beside steering vectors, probes and PCA
#
# Practitioners who look for "the direction of X" in a network usually take one of three
# directions, all fitted from activations $\mathbf h_i$ with a label $y_i$ (here, on the
# agreement task: plural or singular head):
#
# - the **difference of class means** $\boldsymbol\mu_+ - \boldsymbol\mu_-$, the *steering
#   vector* added to activations to push a model towards a behaviour;
# - a **linear probe**: logistic regression of $y$ on $\mathbf h$, whose weight vector is the
#   direction it reads. We fit it ourselves (`own_model.fit_probe`: Newton's method in float64 on
#   activations centred and scaled to unit root mean square, L2 penalty
#   $\lambda =$ {glue:text}`probe_l2`);
# - the **top principal component** of the activations, the direction in which they vary most.
#
# The ACE core is the fourth. The first three look only at the activations and the label; ACE
# also asks the model, through the Jacobians of the read-out, which directions the read-out is
# sensitive to. Each direction $\mathbf d$ becomes a rank-1 core with the training mean, so it
# can be kept, removed and flipped exactly as an ACE core is. All four are fitted on the
# {glue:text}`dir_n_train` training prompts of the agreement chapter's data set, at the layer
# where the ACE core's flip lowers the AUC most (the agreement chapter's rule; with this build's
# sweep: {glue:text}`dir_layers`), and measured on the {glue:text}`dir_n_test` held-out
# prompts:
#
# - the **angle** to the ACE core (0° to 90°: the sign of a direction does not matter);
# - how well it **reads the label**: the AUC of the projection $\mathbf d^\top(\mathbf h -
#   \boldsymbol\mu)$ for plural against singular (each direction oriented on the training
#   half);
# - how much of the **margin's variance** the projection explains: the $R^2$ of the clean
#   margin regressed on it;
# - the AUC of the margin with the direction **kept, removed and flipped** (the unmodified
#   models: {glue:text}`dir_base`).

# %%
display(own_model.directions_table(summary))

# %% tags=["hide-input"]
fig = plots.figure_directions(summary)
glue("fig_directions", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_directions
# :name: fig-own-directions
#
# **Reading the label is not using it.** Top row, by layer: the AUC with which a probe's
# direction reads the number of the held-out prompts (blue), and the AUC of the number margin
# with the probe's direction (dashed) or the ACE core (solid) removed (orange) and flipped
# (red); dotted: the unmodified model; the vertical line marks the chosen layer. Bottom row, at
# the chosen layer, for each direction: the AUC of its projection for the label (blue), and of
# the margin with the direction removed (orange) and flipped (red); dashed: the unmodified
# model. Under each direction, its angle to the ACE core.
# ```
#
# **Readable everywhere, used at the end** (top row). At every swept layer, a probe reads the
# number of the head noun from the last token's residual stream: its AUC is at least
# {glue:text}`sweep_probe_read_min:.3f` at every swept layer of every model. Yet in the first
# {glue:text}`early_depth:.0%` of the layers, removing the probe's direction leaves the AUC at
# {glue:text}`early_probe_remove_min:.3f` or more, and flipping it at
# {glue:text}`early_probe_flip_min:.3f` or more: the model does not use that information
# there (presumably because later layers read the subject's number again from the subject's
# own position, through attention, so changing the last token's copy does not matter). The ACE cores of those layers say the same, without a label: flipping them leaves
# the AUC at {glue:text}`early_ace_flip_min:.3f` or more. Only at the last layers does an
# intervention on one direction change the model's preference, and there the ACE core does so
# most. A probe sweep alone would have placed the number "everywhere".
#
# **At the chosen layer** (bottom row and table), first where the directions agree. Every
# direction but the top principal component reads the number of the held-out prompts well:
# AUC {glue:text}`ace_read_auc` for the ACE core, {glue:text}`md_read_auc` for the mean
# difference, {glue:text}`probe_read_auc` for the probe.
# (At the last layer, keeping a direction alone leaves the margin a function of the coordinate
# along it, so the column "kept" repeats the column "reads the label".) The mean difference is
# the closest to the core, {glue:text}`md_angle_to_ace`° away: both see plural and singular
# prompts on two sides of nearly one axis.
#
# **Where they do not.** Removing the ACE core destroys agreement and flipping it inverts it:
# {glue:text}`ace_effects`. The mean difference is a weaker handle on the model,
# {glue:text}`md_effects`: it is partly the core, partly directions the read-out ignores. The
# probe reads the label best (test accuracy at least {glue:text}`probe_acc_min:.1%`), but it
# lies {glue:text}`probe_angle_to_ace`° from the core, and the model depends on it less, by an
# amount that differs between the models: {glue:text}`probe_effects`. Removing it costs
# {glue:text}`probe_share` of the AUC that removing the core costs (the last column of the
# table). Its projection still predicts the
# margin well ($R^2$ {glue:text}`probe_r2`, against {glue:text}`ace_r2` for the core and
# {glue:text}`md_r2` for the mean difference), because on these prompts it follows the label,
# and so does the margin: a correlation cannot tell a direction the model reads from one that
# merely goes along with it; the intervention can. The top principal component, finally, reads
# the label poorly (AUC {glue:text}`pc_read_auc`) and hardly matters to the margin
# ({glue:text}`pc_effects`): the direction in which the activations vary most is about
# something else.
#
# A probe answers "is the information *there*?". The number of the head noun is there along
# many directions, and a lightly penalised probe finds the one along which the two classes are
# easiest to tell apart, not the one the model reads. How much the answer depends on the penalty
# shows in the probe fitted with every penalty of a grid. A strong penalty turns the probe into
# the mean difference (as $\lambda \to \infty$ the weights shrink along minus the loss gradient
# at zero weights, which points along $\boldsymbol\mu_+ - \boldsymbol\mu_-$): at
# $\lambda =$ {glue:text}`grid_strong_l2` it is within {glue:text}`grid_strong_angle_md:.1f`° of
# it, and removing it gives AUC {glue:text}`grid_strong_remove`. A weak penalty
# ($\lambda =$ {glue:text}`grid_weak_l2`) reads the label better (AUC
# {glue:text}`grid_weak_read`), but the model does not depend on it more: removing it gives
# {glue:text}`grid_weak_remove`.

# %%
display(own_model.probe_table(summary))

# %% [markdown]
# ACE needs no label at all: the read-out's Jacobians say to which directions the margin is
# sensitive, the activations along which of those the prompts actually differ. Its core is a
# direction the model uses by construction; the directions fitted to the label are close to it
# only as far as the label's geometry happens to follow the read-out's.
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
# `hf_module`. No hub is reachable where this book is built, so here they run on a 2-layer
# Llama with random weights built in code (its AUCs are those of chance); with a network,
# `python -m acebook.runner run own_model -p hf_model gpt2 -p hf_module transformer.h.6` runs
# GPT-2, and `-p hf_model smollm2-135m -p hf_module model.layers.27` SmolLM2 offline.
# `load_model` returns our wrapper; its `.hf` is the `transformers` model itself, what
# `from_pretrained` returns.

# %%
lm = load_model(hf_model)  # a hub name loads with transformers
hf, tokenizer = lm.hf, lm.tokenizer  # the plain transformers objects
own = tense.make_dataset(hf_phrases, tense_seed)
train, _ = own.split("train")
test, past = own.split("test")
# the read-out: a function of the model's output (it reads .logits)
margin = logit_difference(tokenizer, [" was", " were"], [" is", " are"])

# %% [markdown]
# `own_model.padded_inputs` tokenises the prompts, pads them on the left and passes position
# ids that count real tokens only, so every prompt ends at the last position (the default
# `positions="last"` of `extract_from_model`) and padding changes nothing:

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
# ## Exercises
#
# ```{exercise} Probes follow the covariance, mean differences do not
# :label: own-ex-probe
#
# Draw two Gaussian classes in $d = 20$ dimensions, $N = 20\,000$ points each, with means
# $\pm\boldsymbol\delta/2$ and the same covariance $\Sigma$. With $\Sigma = I$, compare the
# directions of `own_model.mean_difference` and of `own_model.fit_probe` (penalty $10^{-4}$).
# Then stretch $\Sigma$ to variances $1, 2, \dots, 20$ (diagonal) with $\boldsymbol\delta$ the
# vector of ones: which direction does the weakly penalised probe approach, and what happens to
# it with penalty $10^{3}$? Use `own_model.angle_deg`.
# ```
#
# ````{solution} own-ex-probe
# :class: dropdown
#
# ```python
# import numpy as np
# from corelib.experiments.own_model import angle_deg, fit_probe, mean_difference
#
# rng = np.random.default_rng(0)
# d, n = 20, 20000
# delta = np.ones(d)
# y = np.r_[np.ones(n), np.zeros(n)]
#
# def sample(std):
#     noise = rng.standard_normal((2 * n, d)) * std
#     return noise + np.where(y[:, None] == 1, delta / 2, -delta / 2)
#
# iso = sample(np.ones(d))
# iso_angle = angle_deg(mean_difference(iso, y), fit_probe(iso, y, 1e-4).direction)
#
# std = np.sqrt(np.arange(1, d + 1))           # variances 1, 2, ..., 20
# aniso = sample(std)
# lda = delta / std**2                          # Sigma^-1 delta
# weak, strong = fit_probe(aniso, y, 1e-4), fit_probe(aniso, y, 1e3)
# angles = {
#     "mean difference to delta": angle_deg(mean_difference(aniso, y), delta),
#     "weak probe to Sigma^-1 delta": angle_deg(weak.direction, lda),
#     "weak probe to delta": angle_deg(weak.direction, delta),
#     "strong probe to mean difference": angle_deg(strong.direction, mean_difference(aniso, y)),
# }
# print(f"isotropic: {iso_angle:.1f} degrees")
# print({k: round(v, 1) for k, v in angles.items()})
# ```
#
# With $\Sigma = I$ the two directions coincide up to sampling noise (a few degrees). With the
# stretched covariance the mean difference stays along $\boldsymbol\delta$, while the weakly
# penalised probe turns towards $\Sigma^{-1}\boldsymbol\delta$ (the direction of Fisher's linear
# discriminant, which is the Bayes-optimal boundary of two Gaussians with one covariance): it
# leans on the dimensions where the classes overlap least *relative to their spread*, whatever
# their size. A strong penalty brings it back to the mean difference. In a network, low-variance
# directions that separate the classes are where a probe goes, and they need not be the
# directions that later layers read.
# ````
#
# ```{exercise} Reading without using
# :label: own-ex-unused
#
# Near the activations, the margin is $f(\mathbf h) \approx f(\boldsymbol\mu) + \mathbf
# g^\top(\mathbf h - \boldsymbol\mu)$ with $\mathbf g = \nabla f$. By how much does removing a
# unit direction $\mathbf d$ (centred) change a prompt's margin? Which directions can be removed
# without changing any margin, however well they read the label?
# ```
#
# ```{solution} own-ex-unused
# :class: dropdown
#
# Removal replaces $\mathbf h$ by $\mathbf h - \mathbf d\,\mathbf d^\top(\mathbf h -
# \boldsymbol\mu)$, so the margin changes by $-(\mathbf g^\top\mathbf d)\,\mathbf
# d^\top(\mathbf h - \boldsymbol\mu)$: the product of how much the read-out cares about
# $\mathbf d$ and how far the prompt sits along it. Any direction orthogonal to $\mathbf g$ can be
# removed (or flipped) without effect, even if its projection separates the classes perfectly.
# The relevance matrix $\mathbb E[\mathbf J^\top \mathbf J]$ of ACE measures $\mathbf g^\top\mathbf
# d$ over the data, the activity matrix the spread along $\mathbf d$; the core maximises
# their product, which is why it is the direction whose removal matters most.
# ```
