"""Checks a student runs on their own code, one module per chapter, named as the chapter.

Each chapter's checked exercise gives a stub to fill in and a line that checks it::

    from corelib.exercises import markov_chain as ex
    ex.check_oracle_r2(oracle_r2)      # your function

A check calls the student's function on the book's case, on random cases and on edge cases,
compares each answer with the library's (an independent computation where the library has
none) and says in plain words what is wrong: which input, what came back, what was expected,
and a hint at the usual mistake. It prints one line when every case passes. A stub that still
raises ``NotImplementedError`` is reported as not done yet, not as an error, so a chapter with
its stubs unfilled still runs from top to bottom.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Case", "check_function"]


@dataclass(frozen=True)
class Case:
    """One input of a check: positional ``args``, the expected answer, and a few words saying
    what the case is (shown when it fails)."""

    args: tuple
    expected: Any
    what: str


def _close(got: Any, want: Any, rtol: float, atol: float) -> bool:
    try:
        a, b = np.asarray(got), np.asarray(want)
        if a.shape != b.shape or not (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
            return False
        return bool(np.allclose(a, b, rtol=rtol, atol=atol))
    except (TypeError, ValueError):  # not array-like, or not numbers: simply wrong
        return False


def _shown(x: Any) -> str:
    if isinstance(x, np.ndarray):
        return np.array2string(x, precision=4, threshold=12)
    if isinstance(x, float):
        return f"{x:.6g}"
    return repr(x)


def check_function(
    student: Callable,
    cases: Iterable[Case],
    *,
    name: str,
    hints: Sequence[tuple[Callable[[Any, Case], bool], str]] = (),
    rtol: float = 1e-6,
    atol: float = 1e-9,
) -> bool:
    """Run ``student`` on every case; raise ``AssertionError`` at the first wrong answer.

    ``hints`` are (test, sentence) pairs: when a wrong answer ``got`` satisfies ``test(got, case)``
    the sentence is added to the message (e.g. "you used the uniform distribution; weight by pi").
    Returns False (after printing why) when the function is still a stub, True when all pass.
    """
    if not callable(student):
        raise TypeError(f"pass your function itself, e.g. check(my_{name}), not {type(student).__name__}.")
    cases = list(cases)
    for i, case in enumerate(cases, 1):
        try:
            got = student(*case.args)
        except NotImplementedError:
            print(f"{name}: not implemented yet. Fill in the stub, run its cell, then run this check again.")
            return False
        except Exception as exc:  # the student's error, reported with the input that raised it
            raise AssertionError(
                f"{name} raised {type(exc).__name__}: {exc}\n  on case {i} ({case.what}), arguments {_shown(case.args)}"
            ) from exc
        if not _close(got, case.expected, rtol, atol):
            extra = [text for test, text in hints if _safe(test, got, case)]
            raise AssertionError(
                f"{name} is wrong on case {i} of {len(cases)} ({case.what}):\n"
                f"  returned {_shown(got)}\n  expected {_shown(case.expected)}"
                + "".join(f"\n  Hint: {t}" for t in extra)
            )
    print(f"{name}: all {len(cases)} cases pass.")
    return True


def _safe(test: Callable[[Any, Case], bool], got: Any, case: Case) -> bool:
    try:
        return bool(test(got, case))
    except Exception:  # noqa: BLE001 - a hint that does not apply is not shown
        return False
