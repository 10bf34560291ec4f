# ---
# jupyter:
#   corelib_stores_results: false
#   corelib_inputs: [claims, run_times, recorded]
#   written_numbers:
#   - otherwise ±10 % of a single value
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
# # The paper's claims, checked
#
# This page lists every quantitative claim the paper makes about its experiments. Beside each
# claim it gives the value **this build** of the book measured, and the test that value must pass.
#
# The page starts with a summary per chapter, written by hand: what reproduces, what differs, and
# why we think so. A sentence that rests on a result cites it with a small badge after the phrase
# it supports. The badge shows the claim's {term}`status` as a mark and a word; its tooltip gives
# the value. If a rerun changes a status, the page opens with a warning that quotes the sentence.
# The tables come next, generated from what the chapters recorded.
#
# ## Summary by chapter
#
# **{doc}`How ACE works <ace_method>`.** The paper makes no quantitative claim about the method
# itself. It remarks that ACE reduces to balanced truncation for a linear system. The chapter
# checks that remark on its own examples; the check is the book's, and is not listed here.
#
# **{doc}`A Markov chain <markov_chain>`.** The book's settings are the paper's, so these claims
# are judged on this build. ACE finds a core of the expected rank in each model
# {claim}`markov.rank <holds>`. Keeping the core alone preserves the model's accuracy
# {claim}`markov.keep_accuracy <holds>`. The two leading canonical correlations between the cores
# are as high as the paper's {claim}`markov.cca_top2 <holds>`. The operators fitted in the cores
# have the chain's eigenvalues {claim}`markov.spectrum_error <holds>`.
#
# The paper's finer numbers are narrow ranges, measured on one set of three models. They are the
# ranges of its Table A2 (projector overlaps, principal angles, the third and the mean canonical
# correlation) and of the accuracy left once the core is removed. Three new models need not land in them. The
# table below says which of them this build's models pass.
#
# **{doc}`Modular addition <modular_addition>`.** These claims are judged on the first part of the
# recorded paper-scale run, and every one reproduces. The models grok at the paper's epoch
# {claim}`modular.grok_epoch <reproduced>`. The cores settle as they grok
# {claim}`modular.core_settles <reproduced>`. The core is necessary
# {claim}`modular.remove_accuracy <reproduced>`, which is true by the construction of the rank. It
# is also sufficient {claim}`modular.keep_ratio <reproduced>`. The shift operator's eigenvalues
# move onto the unit circle {claim}`modular.unit_after <reproduced>`.
#
# Most of these claims have no number in the paper ("near chance", "on the circle",
# "coincident"). The basis column says how we read each one. That reading is our choice; the paper
# does not make it for us.
#
# **{doc}`Core inflation <core_inflation>`.** On the recorded run at the paper's settings, the
# direction reproduces. The cores end larger with weight decay than without it
# {claim}`inflation.arm_dim_gap <reproduced>`. The shift operators gather nearly every possible
# rotational mode {claim}`inflation.modes_end <reproduced>`.
#
# The sizes do not reproduce. The core is smaller than the paper's at the branch
# {claim}`inflation.core_dim_grok <differs>` and at the end
# {claim}`inflation.core_dim_end <differs>`. The sufficient dimension grows where the paper has it
# stable {claim}`inflation.sufficient_stable <differs>`. Without weight decay, the mode count
# grows too {claim}`inflation.modes_sparse <differs>`.
#
# Why the sizes differ is open. We have three hypotheses, none of them tested yet. A setting the
# paper does not state, such as dropout, may scale every core alike. The sufficiency test may be so
# strict that it needs more directions as the margin spreads over more modes. And the arm without
# weight decay restarts its optimizer; the clock chapter's restarted arm is a control for that.
#
# **{doc}`Grokking theory <grokking_theory>`.** Its one checkable identity holds to rounding
# {claim}`theory.psi_norm <reproduced>`. The rest of the chapter derives the laws the sweeps test.
#
# **{doc}`Grokking sweeps <grokking_sweeps>`.** These claims are judged on the recorded sweeps at
# the paper's settings. The delay falls as the inverse of the weight decay
# {claim}`sweeps.omega_exponent <reproduced>`. The law in the modulus fits
# {claim}`sweeps.r2_p <reproduced>`, with the paper's critical modulus
# {claim}`sweeps.p_crit <reproduced>`. But its optimizer constant lies outside the paper's
# tolerance {claim}`sweeps.Omega <differs>`.
#
# The chapter shows why this need not mean a different law. The sweep's moduli pin down the
# product of the two constants far better than either constant alone. That product agrees with the
# paper's, and the paper's optimizer constant lies inside our bootstrap interval. What differs is
# how the product splits between the two constants: ours has a larger optimizer constant and a
# smaller critical modulus.
#
# **{doc}`The clock of core inflation <inflation_clock>`.** The paper makes no claims about it.
# Its findings are in the section "Beyond the paper" below.
#
# **{doc}`Subject–verb agreement <subject_verb_agreement>`.** Every claim is measured at reduced
# settings {claim}`sva.rank <measured at reduced settings>`. The book loads two small models
# offline, SmolLM2-135M and Gemma-3 270M. The paper used GPT-2 in three sizes, Llama-3.1-8B,
# Gemma-2-9B and Qwen2.5-32B. The rows say whether the small models' values pass the paper's
# tolerances; they cannot reproduce the paper's numbers. The steering claims carry one more
# caveat. The steering gate was chosen on the prompts that then judge it, as the chapter explains.
#
# **{doc}`ACE on your own model <own_model>`.** This is not an experiment of the paper, so it has
# no claims. Its findings are the book's own, listed under "Beyond the paper" below.
#
# ## How the claims are judged
#
# The tables below have one row per claim, grouped by chapter. A row gives the paper's value,
# ours, the test ours must pass, and the resulting status. Nothing in the "ours" column is typed by
# hand. Each chapter, when it executes, saves what it measured (`corelib.claims.record`). This
# page joins those files with the registry of the paper's claims, `corelib.claims.CLAIMS`.
#
# Each claim carries a **tolerance**, the test our value must pass, and its **basis**, where the
# tolerance comes from. The tolerances are as strict as the paper's own numbers:
#
# - the paper's bound, where it states one (core-only AUC {glue:text}`example_bound`);
# - otherwise the spread of the values it reports across models or seeds (core-removed Markov
#   accuracy {glue:text}`example_spread`);
# - otherwise ±10 % of a single value (p_crit {glue:text}`example_single`).
#
# Where the paper gives no number ("near zero", "stable"), the basis says how we read it. A
# measured value may hold several numbers, one per model or per pair of models. It passes only if
# every number passes. The status is one of four:
#
# - **reproduced**: measured at the paper's settings, and within tolerance;
# - **differs**: measured at the paper's settings, and outside it;
# - **measured at reduced settings**: the chapter ran at other settings than the paper's, such as
#   fewer seeds, a shorter horizon or other language models (the `settings` column lists them).
#   Such a run can show a trend but cannot reproduce a claim, so this status does not depend on
#   the numbers. The column "within tolerance" still says whether they passed;
# - **not run in this profile**: no chapter of this build measured it.
#
# Three chapters make claims that need the paper's scale. Modular addition and core inflation
# need the paper's full training horizon; the grokking sweeps need all of its seeds and
# conditions. Those runs take many CPU hours, so they were run once at the paper's settings. Their
# compact results are kept in the repository, in `recorded/`, with their provenance and a command
# that re-derives a sample of them. Each is a {term}`recorded run`.
#
# Where a recorded run measured a claim, the claim is judged on it. The `source` column then names
# the run. The column `this build` gives the value the build computed at its own, smaller
# settings.
#
# The page is rebuilt whenever a chapter saves new values, so it always describes the chapters
# beside it. The `profile` column says which profile produced each value; the `smoke` profile only
# checks that the code runs.

# %% tags=["parameters"]
# None means results/claims (or ACE_RESULTS_DIR/claims)
claims_folder = None  # folder of the recorded claims

# %%
import pandas as pd
from IPython.display import HTML, display
from myst_nb import glue

from acebook.citations import anchored
from acebook.claims_page import claims_table, findings_table
from corelib import claims

records = claims.load_records(claims_folder)
table = pd.DataFrame(claims_table(records))

# %% tags=["hide-input"]
counts = table["status"].value_counts()
names = ("n_reproduced", "n_differs", "n_reduced", "n_not_run")
for status, name in zip(claims.STATUSES, names):
    glue(name, int(counts.get(status, 0)), display=False)
reduced = table[table["status"] == "measured at reduced settings"]
n_within = int((reduced["within tolerance"] == "yes").sum())
glue("n_reduced_within", n_within, display=False)
glue("n_claims", len(table), display=False)

# %% tags=["hide-input"]
examples = {"example_bound": "sva.auc_keep",
            "example_single": "sweeps.p_crit",
            "example_spread": "markov.remove_accuracy"}
for name, claim_id in examples.items():
    glue(name, claims.claim(claim_id).tolerance, display=False)
glue("n_chapters", len(records), display=False)
profiles = sorted({r["profile"] for r in records.values()})
glue("profiles", ", ".join(profiles) or "none", display=False)

# %% [markdown]
# The tables below hold {glue:text}`n_claims` claims, one table per chapter, coloured by status.
# This build reproduced {glue:text}`n_reproduced` of them. It measured a different value at the
# paper's settings for {glue:text}`n_differs`. It measured {glue:text}`n_reduced` at reduced
# settings, of which {glue:text}`n_reduced_within` are within the paper's tolerance. It did not
# measure {glue:text}`n_not_run`.
#
# The values come from {glue:text}`n_chapters` chapters, executed with the profile(s)
# {glue:text}`profiles`.

# %%
COLORS = {"reproduced": "#d8f0d8", "differs": "#f8d8d0",
          "measured at reduced settings": "#f6ecc8",
          "not run in this profile": "#eeeeee"}
COLUMNS = ["id", "claim", "paper", "ours", "tolerance",
           "within tolerance", "status", "basis", "settings", "profile",
           "source", "this build", "note"]


def claims_html(rows: pd.DataFrame) -> str:
    """The claims table as HTML, one colour per status."""
    styler = (rows[COLUMNS].style.hide(axis="index")
              .format(anchored, subset=["id"])
              .map(lambda s: f"background-color: {COLORS[s]}",
                   subset=["status"])
              .set_properties(**{"text-align": "left",
                                 "font-size": "0.85em"}))
    return styler.to_html()


# %%
for chapter, rows in table.groupby("chapter", sort=False):
    display(HTML(f"<h3>{chapter.replace('_', ' ').capitalize()}</h3>"))
    display(HTML(claims_html(rows)))

# %% [markdown]
# ## Beyond the paper
#
# The table at the end of this section lists the book's own {term}`findings <finding>`
# (`corelib.claims.FINDINGS`), apart from the paper's claims. Each is registered like a claim,
# with the condition under which it holds in place of a tolerance. Its status is "holds" or "does
# not hold", at whatever settings it was measured. The column "paper" says what the paper proposes
# or leaves open.
#
# The paper ends with ideas it does not test, and the book tests two of them. Does core
# inflation run on the grokking theory's clock, learning rate × weight decay? And does annealing
# the decay soon after grokking keep the compact core (the paper's
# {term}`interpretability window`)?
#
# **The clock** ({doc}`The clock of core inflation <inflation_clock>`). Rescaling time by
# learning rate × weight decay did not bring the runs' curves together
# {claim}`clock.tau_collapse <does not hold>`. Instead, every faster run ended with a smaller core
# than the paper's run at the same rescaled time {claim}`clock.smaller_at_equal_tau <holds>`.
#
# **The window on a fast clock.** Annealing the decay after grokking did not keep the core compact.
# The control arm kept the decay and only restarted the optimizer at grokking. The annealed arms
# ended with larger cores than this control {claim}`window.anneal_larger <holds>`. Removing the
# decay at grokking did not leave smaller cores than the control either
# {claim}`window.removed_smaller <does not hold>`. Removing it late did not shrink a grown core
# {claim}`window.late_removal_deflates <does not hold>`.
#
# Whether this carries over to the paper's clock is a separate question. Two differences are built
# into the fast clock's design. Once the decay is off, training runs on the learning rate alone,
# and the fast clock's learning rate is larger. And its kept run barely inflates, so there is
# little inflation for the window to prevent.
#
# **The window on the paper's clock.** Over the paper's full run, the answer is mixed. The run that
# keeps the decay inflates {claim}`window_paper.kept_inflates <holds>`. Stopping the decay at
# grokking, at once or over a ramp, kept a compact core for the whole run in some models and not
# in others. The annealed models all ended below the kept ones, by a small margin
# {claim}`window_paper.anneal_smaller <holds>`. But they did not end below the control that only
# restarts the optimizer {claim}`window_paper.anneal_below_restart <does not hold>`.
#
# Removing the decay at once did not leave smaller cores than keeping it
# {claim}`window_paper.removed_smaller <does not hold>`. A late removal did not deflate a grown
# core {claim}`window_paper.late_removal_deflates <does not hold>`. Every model still generalises
# {claim}`window_paper.all_generalise <holds>`. So the window the paper proposes can keep a
# compact core, but not reliably in these runs. How often it does is a question for many more
# seeds.
#
# **Your own model.** The chapter {doc}`ACE on your own model <own_model>` adds findings of another
# kind. They set the ACE core beside the directions practitioners fit to a label, such as probes
# and steering vectors. They are listed in the same table, and the chapter's Summary reads them.

# %%
SHOWN = {"id": "id", "chapter": "chapter", "claim": "what is measured",
         "paper": "paper", "ours": "ours", "tolerance": "holds when",
         "status": "status", "basis": "basis", "profile": "profile",
         "source": "source"}
found = pd.DataFrame(findings_table(records))[list(SHOWN)]
display(found.rename(columns=SHOWN).style.hide(axis="index")
        .format(anchored, subset=["id"]))

# %% [markdown]
# ## Reading the table
#
# - A claim that **differs** is not hidden or re-labelled. The reasons we know are in the note
#   column, in the summary above and in the chapter that measured it.
# - A claim **measured at reduced settings** is one this build cannot settle. The `book` profile
#   trains core inflation for a fraction of the paper's horizon, and sweeps fewer seeds and
#   conditions. Where a recorded paper-profile run exists, the claim is judged on it instead (see
#   `source`). Rerun with `--profile paper` to test those claims at full scale yourself.
# - Some models of the paper cannot be loaded on a machine without a network: GPT-2, Llama-3.1,
#   Gemma-2 and Qwen2.5. Claims about them are checked on the language models the book can load;
#   the chapter on subject–verb agreement says which.
# - To add a claim, register it in `corelib/claims.py` with the paper's value, a tolerance and its
#   basis. Then record the measured value in the chapter that measures it, with the settings that
#   differ from the paper's (`claims.deviations`). `tests/test_claims.py` checks that every
#   recorded claim appears on this page.

# %% [markdown]
# ## What this build cost
#
# The table below gives the cost of reproducing these values on a machine like the one that built
# this page. For each chapter, it lists the wall time of its last execution that computed its
# results, the profile it ran with, and how many CPUs it could use. The runner times every chapter
# it executes. A chapter taken from the runner's cache, or run again on results already stored
# under `results/`, keeps the time of the run that computed them. "Read back" marks a chapter
# whose only recorded run found its results already stored.

# %%
from acebook.run_times import code_label, recorded_run_times

# every chapter but this page
records = [r for r in recorded_run_times() if r["chapter"] != "claims"]
run_times = pd.DataFrame(records)
if run_times.empty:
    print("No chapter has been executed by the runner yet.")

# %% tags=["hide-input"]
if not run_times.empty:
    run_times["minutes"] = (run_times["seconds"] / 60).round(1)
    unknown = pd.Series(index=run_times.index, dtype=object)
    computed = run_times.get("computed", unknown)
    results = {True: "computed", False: "read back"}
    run_times["results"] = computed.map(results).fillna("")
    run_times["code"] = [code_label(r) for r in records]
    shown = ["chapter", "profile", "minutes", "threads", "results",
             "code", "finished"]
    display(run_times[shown].style.hide(axis="index"))

# %% tags=["hide-input"]
minutes = sum(r["seconds"] for r in records) / 60
minutes_text = f"{minutes:.1f}" if records else "n/a"
glue("build_minutes", minutes_text, display=False)
other_code = sum(r["same_code"] is False for r in records)
glue("other_code_chapters", str(other_code), display=False)

# %% [markdown]
# Executing the chapters took {glue:text}`build_minutes` minutes in total. The chapters that
# train models dominate; see [Rerun it yourself](../rerun.md) for what each profile costs and
# what a GPU changes.
#
# The "code" column says which code computed each chapter's results. It gives the git commit of
# the checkout, with `+modified` if `corelib/` or `notebooks/` had uncommitted changes. Stored
# results are keyed by their parameters, not by the code. So a chapter can show results that an
# earlier version of `corelib` computed; such a chapter is marked "(other corelib)". There are
# {glue:text}`other_code_chapters` of them on this page ("not recorded": the run came before the
# runner kept code versions). The difference may lie only in comments or documentation. To
# recompute a chapter with the current code, delete its folder under `results/` (or point
# `ACE_RESULTS_DIR` to an empty folder) and run it again with `--force`.


# %% [markdown]
# ## The paper profile on a GPU
#
# The recorded paper-scale runs trained for hours on a CPU. The table below gives the same
# training's times on a GPU, beside the CPU's. They were measured on {glue:text}`gpu_device`, on
# {glue:text}`gpu_measured`.
#
# Core inflation takes {glue:text}`gpu_inflation` on the GPU, where the record's CPU took
# {glue:text}`gpu_inflation_cpu`. Every condition of the sweeps takes {glue:text}`gpu_sweeps`,
# where the record's CPU took {glue:text}`gpu_sweeps_cpu`: the sum over the conditions, each
# trained on one thread.
#
# A GPU lent for minutes cannot train for hours. So each run was timed over a slice of its own
# code with the paper's settings, and the slice's rate was scaled to the records' lengths.
# `benchmarks/paper_profile_times.py` gives the method and where it errs. On the GPU, a training
# step of the whole stack of seeds takes little longer than a step of one seed, whatever the
# modulus. Launching the step's kernels, not arithmetic, sets its pace. That is why the largest
# moduli, the slowest conditions on a CPU, gain the most.
#
# A sample of each of the two records was also re-derived from scratch on that GPU. Neither
# re-derivation was bit-identical to its record, as expected on other hardware. Both agree with
# their records at the level the claims are made. For core inflation (its first
# {glue:text}`gpu_inflation_epochs` epochs), the largest change of a seed mean was
# {glue:text}`gpu_inflation_z` standard errors of the difference. For one sweep condition
# ({glue:text}`gpu_sweeps_condition`), it was {glue:text}`gpu_sweeps_z`. The numbers are in
# `recorded/paper_profile_gpu.json`, with the machine.

# %%
from acebook.run_times import gpu_paper_times

gpu = gpu_paper_times()
if gpu is None:
    print("No GPU timing is recorded in recorded/.")

# %% tags=["hide-input"]
if gpu is not None:
    display(gpu.table.style.hide(axis="index").format(precision=1))
for name in ("device", "measured", "inflation", "inflation_cpu",
             "sweeps", "sweeps_cpu", "inflation_z", "sweeps_z",
             "inflation_epochs", "sweeps_condition"):
    value = getattr(gpu, name) if gpu is not None else "not measured"
    glue(f"gpu_{name}", value, display=False)
