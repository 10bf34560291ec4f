# ---
# jupyter:
#   corelib_stores_results: false
#   corelib_inputs: [claims, findings, run_times]
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
# Every quantitative claim the paper makes about its experiments is listed below next to the
# value **this build** of the book measured. Nothing in the "ours" column is typed by hand: each
# chapter, when it executes, saves what it measured (`corelib.claims.record`), and this page
# joins those files with the registry of the paper's claims, `corelib.claims.CLAIMS`.
#
# Each claim carries a **tolerance**, the test our value must pass, and its **basis**, where
# the tolerance comes from. The tolerances are as strict as the paper's own numbers: the paper's
# bound where it states one (core-only AUC {glue:text}`example_bound`), otherwise the spread of
# the values it reports across models or seeds (core-removed Markov accuracy
# {glue:text}`example_spread`), otherwise ±10 % of a single value (p_crit
# {glue:text}`example_single`). Where the paper gives no number ("near zero", "stable") the basis
# says how we read it. A measured value with several numbers (one per model, per pair of models)
# passes only if every number passes. The status is
#
# - **reproduced**: measured at the paper's settings, and within tolerance;
# - **differs**: measured at the paper's settings, and outside it;
# - **measured at reduced settings**: the chapter ran at other settings than the paper's (fewer
#   seeds, a shorter horizon, other language models: the `settings` column lists them). Such a
#   run can show a trend but cannot reproduce a claim, so this status does not depend on the
#   numbers; the column "within tolerance" still says whether they passed;
# - **not run in this profile**: no chapter of this build measured it.
#
# Two chapters make claims that need the paper's scale: core inflation over 20 000 epochs, and
# the grokking sweeps over 12 seeds and 13 conditions. Those runs take many CPU hours, so they
# were run once at the paper's settings and their compact results are kept in the repository
# (`recorded/`, with their provenance and a command that re-derives a sample of them). Where a
# recorded run measured a claim, the claim is judged on it: the `source` column names the run,
# and the column `this build` gives the value the build computed at its own, smaller settings.
#
# The page is rebuilt whenever a chapter saves new values, so it always describes the chapters
# beside it. Which profile produced each value is in the `profile` column: the `smoke` profile
# only checks that the code runs.

# %% tags=["parameters"]
# None means results/claims (or ACE_RESULTS_DIR/claims)
claims_folder = None  # folder of the recorded claims

# %%
import pandas as pd
from IPython.display import HTML, display
from myst_nb import glue

from acebook.claims_page import claims_table
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
# Of the {glue:text}`n_claims` claims, this build reproduced {glue:text}`n_reproduced`, measured
# a different value at the paper's settings for {glue:text}`n_differs`, measured
# {glue:text}`n_reduced` at reduced settings ({glue:text}`n_reduced_within` of them within the
# paper's tolerance), and did not measure {glue:text}`n_not_run`. The values come from
# {glue:text}`n_chapters` chapters, executed with the profile(s) {glue:text}`profiles`.

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
# The paper ends with ideas it does not test. The chapter on the clock of core inflation tests
# two of them, and what it found is listed here, apart from the paper's claims: these are this
# book's own measurements, with no value of the paper to compare against and no tolerance. The
# `settings` column says at what scale each was measured.

# %%
found = claims.load_findings()
rows = [{"chapter": chapter, "finding": f["statement"],
         "settings": data["settings"], "profile": data["profile"]}
        for chapter, data in found.items() for f in data["findings"]]
if rows:
    display(pd.DataFrame(rows).style.hide(axis="index"))
else:
    print("No chapter of this build recorded findings beyond the paper.")

# %% [markdown]
# ## Reading the table
#
# - A claim that **differs** is not hidden or re-labelled: the reasons we know are in the note
#   column (and in the chapter that measured it).
# - A claim **measured at reduced settings** is one this build cannot settle: the `book` profile
#   trains core inflation for a fraction of the paper's 20 000 epochs and sweeps fewer seeds and
#   conditions. Where a recorded paper-profile run exists, the claim is judged on it instead (see
#   `source`); rerun with `--profile paper` to test those claims at full scale yourself.
# - Claims about models that cannot be loaded on a machine without a network (GPT-2, LLaMA-3.1,
#   Gemma-2 and Qwen2.5 in the paper) are checked on the language models the book can load; the
#   chapter on subject–verb agreement says which.
# - To add a claim, register it in `corelib/claims.py` with the paper's value, a tolerance and
#   its basis, and record the measured value in the chapter that measures it, with the settings
#   that differ from the paper's (`claims.deviations`); `tests/test_claims.py` checks that every
#   recorded claim appears on this page.

# %% [markdown]
# ## What this build cost
#
# The runner times every chapter it executes. The table lists, for each chapter, the wall time
# of its last execution that computed its results, the profile it ran with and how many CPUs it
# could use: the cost of reproducing these values on a machine like the one that built this page.
# A chapter taken from the runner's cache, or run again on results already stored under
# `results/`, keeps the time of the run that computed them; "read back" marks a chapter whose
# only recorded run found its results already stored.

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
# train models dominate; see
# [Rerun it yourself](../rerun.md) for what each profile costs and what a GPU changes.
#
# The "code" column says which code computed each chapter's results: the git commit of the
# checkout (`+modified` if `corelib/` or `notebooks/` had uncommitted changes). Stored results
# are keyed by their parameters, not by the code, so a chapter can show results that an earlier
# version of `corelib` computed; such a chapter is marked "(other corelib)", and there are
# {glue:text}`other_code_chapters` of them on this page ("not recorded": the run came before
# the runner kept code versions). The difference may lie only in comments or documentation. To
# recompute a chapter with the current code, delete its folder under `results/` (or point
# `ACE_RESULTS_DIR` to an empty folder) and run it again with `--force`.

