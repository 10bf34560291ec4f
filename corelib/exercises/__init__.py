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

import contextvars
import copy
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Case", "TIME_LIMIT", "WrongAnswer", "check_function"]


@dataclass(frozen=True)
class Case:
    """One input of a check: positional ``args``, the expected answer, and a few words saying
    what the case is (shown when it fails)."""

    args: tuple
    expected: Any
    what: str


class WrongAnswer(ValueError):
    """Raised by a check's own code (not the student's) when an answer cannot even be compared,
    e.g. a basis of the wrong shape: reported as a wrong answer, with its message, not as an
    error the student's function raised."""


def _close(got: Any, want: Any, rtol: float, atol: float) -> bool:
    try:
        a, b = np.asarray(got), np.asarray(want)
        if a.shape != b.shape or not (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
            return False
        return bool(np.allclose(a, b, rtol=rtol, atol=atol))
    except (TypeError, ValueError):  # not array-like, or not numbers: simply wrong
        return False


_FEW = 6  # an array with at most this many entries is shown whole; a larger one by its shape


def _entries(a: np.ndarray) -> str:
    """A few numbers, on one line, without brackets."""
    text = np.array2string(a.ravel(), precision=4, separator=", ", max_line_width=10**6)[1:-1]
    return " ".join(text.split()).replace(" ,", ",")  # no column alignment on one line


def _shown(x: Any, *, limit: int = 160) -> str:
    """A value in a message, on one line and short: a small array whole, a larger one by its shape
    and first entries (a message must never print whole matrices)."""
    if isinstance(x, tuple):  # arguments, or several results
        shown = [_shown(v, limit=limit) for v in x[:_FEW]]
        return "(" + ", ".join(shown + (["..."] if len(x) > _FEW else [])) + ("," if len(x) == 1 else "") + ")"
    if isinstance(x, np.ndarray) or type(x) is list:  # a list subclass keeps its own repr
        try:
            a = np.asarray(x)
        except (TypeError, ValueError):  # ragged: not an array
            a = None
        if a is not None and (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
            if a.size <= _FEW:
                return f"[{_entries(a)}]" + (f" (shape {a.shape})" if a.ndim > 1 else "")
            return f"a {a.shape} array starting [{_entries(a.ravel()[:3])}, ...]"
    if isinstance(x, (float, np.floating)):
        return f"{x:.6g}"
    text = " ".join(repr(x).split())
    return text if len(text) <= limit else text[: limit - 5] + " ..."


def _difference(got: Any, want: Any, rtol: float = 1e-6, atol: float = 1e-9) -> str:
    """Where an array answer departs from the expected one, in one line ('' for scalars)."""
    try:
        a, b = np.asarray(got), np.asarray(want)
        if a.shape != b.shape:
            return f"\n  shape {a.shape}, expected shape {b.shape}" if a.size > 1 or b.size > 1 else ""
        if a.size <= 1 or not np.issubdtype(a.dtype, np.number):
            return ""
        missing = ~np.isfinite(a) & np.isfinite(b)
        if missing.any():
            i = np.unravel_index(np.argmax(missing), a.shape)
            return f"\n  {int(missing.sum())} of {a.size} entries are not finite, e.g. at index {_index(i)}: {a[i]}"
        gap = np.abs(a - b)
        i = np.unravel_index(np.argmax(gap), a.shape)
        wrong = int(np.count_nonzero(gap > rtol * np.abs(b) + atol))
        return (
            f"\n  {wrong} of {a.size} entries differ; the largest difference, {gap[i]:.3g}, is at index "
            f"{_index(i)}: returned {_shown(a[i].item())}, expected {_shown(b[i].item())}"
        )
    except (TypeError, ValueError):
        return ""


def _index(i: tuple) -> str:
    return str(int(i[0])) if len(i) == 1 else str(tuple(int(k) for k in i))


def _error_text(exc: Exception, limit: int = 600) -> str:
    """An exception's message, on at most four lines and ``limit`` characters (an error raised
    with a whole array in its message must not flood the page)."""
    lines = [ln.rstrip() for ln in str(exc).splitlines() if ln.strip()]
    text = "\n    ".join(lines[:4]) + (" ..." if len(lines) > 4 else "")
    return text if len(text) <= limit else text[: limit - 4] + " ..."


TIME_LIMIT = 60.0
"""Seconds one case may take; a function still running then has, most likely, a loop that never ends."""


def check_function(
    student: Callable,
    cases: Iterable[Case],
    *,
    name: str,
    hints: Sequence[tuple[Callable[[Any, Case], bool], str]] = (),
    rtol: float = 1e-6,
    atol: float = 1e-9,
    time_limit: float | None = None,
) -> bool:
    """Run ``student`` on every case; raise ``AssertionError`` at the first wrong answer.

    ``hints`` are (test, sentence) pairs: when a wrong answer ``got`` satisfies ``test(got, case)``
    the sentence is added to the message (e.g. "you used the uniform distribution; weight by pi").
    Each case runs in a thread of its own and may take ``time_limit`` seconds (None:
    :data:`TIME_LIMIT`): a function that
    loops forever fails the check, naming the limit, instead of hanging it. ``SystemExit`` and
    ``KeyboardInterrupt`` raised by the function fail the check like any error it raises, and an
    answer of the wrong type (a bool for a number, a list or a tensor for an array) is named.
    Returns False (after printing why) when the function is still a stub, True when all pass.
    """
    if not callable(student):
        raise TypeError(f"pass your function itself, e.g. check(my_{name}), not {type(student).__name__}.")
    cases, time_limit = list(cases), TIME_LIMIT if time_limit is None else time_limit
    for i, case in enumerate(cases, 1):
        outcome = _run_case(student, case.args, time_limit)
        if outcome.error is not None or outcome.timed_out:
            if isinstance(outcome.error, NotImplementedError):
                print(f"{name}: not implemented yet. Fill in the stub, run its cell, then run this check again.")
                return False
            raise AssertionError(_failure(name, i, len(cases), case, outcome, time_limit)) from outcome.error
        got = outcome.result
        wrong_type = _type_problem(got, case.expected)
        if wrong_type:
            raise AssertionError(f"{name} is wrong on case {i} of {len(cases)} ({case.what}):\n  {wrong_type}")
        if not _close(got, case.expected, rtol, atol):
            extra = [text for test, text in hints if _safe(test, got, case)]
            raise AssertionError(
                f"{name} is wrong on case {i} of {len(cases)} ({case.what}):\n"
                f"  returned {_shown(got)}\n  expected {_shown(case.expected)}"
                + _difference(got, case.expected, rtol, atol)
                + "".join(f"\n  Hint: {t}" for t in extra)
            )
    print(f"{name}: all {len(cases)} cases pass.")
    return True


@dataclass
class _Outcome:
    """What one call of the student's function did: returned ``result``, raised ``error`` (any
    ``BaseException``), or was still running at the time limit."""

    result: Any = None
    error: BaseException | None = None
    timed_out: bool = False


def _run_case(student: Callable, args: tuple, time_limit: float) -> _Outcome:
    """Call ``student(*args)`` in a daemon thread (no signals: any OS, any thread, Jupyter included)
    and wait at most ``time_limit`` seconds. A thread cannot be stopped from outside, so a function
    that never ends keeps running in the background until the kernel restarts; the check goes on.
    The caller's context variables, torch's gradient mode and CUDA device (all per thread) are
    carried over. The function gets deep copies of the arguments: what it changes in them (still
    running after a time out, too) never reaches the case, its message or a later check."""
    outcome, context = _Outcome(), contextvars.copy_context()
    torch = sys.modules.get("torch")
    grad = torch.is_grad_enabled() if torch is not None else None
    # A thread starts on device 0; the caller may have chosen another (not asked where CUDA is unused).
    cuda = torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized()
    device = torch.cuda.current_device() if cuda else None
    args = tuple(_copied(a) for a in args)

    def call() -> None:
        try:
            if grad is not None:
                torch.set_grad_enabled(grad)
            if device is not None:
                torch.cuda.set_device(device)
            outcome.result = context.run(student, *args)
        except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt are the student's too
            outcome.error = exc

    worker = threading.Thread(target=call, name="exercise-check", daemon=True)
    worker.start()
    worker.join(time_limit)
    outcome.timed_out = worker.is_alive()
    return outcome


def _copied(arg: Any) -> Any:
    """A deep copy of ``arg``; the argument itself where it has none (e.g. a tensor inside a graph)."""
    try:
        return copy.deepcopy(arg)
    except Exception:  # noqa: BLE001 - any object may refuse a copy; the case then runs as before
        return arg


def _failure(name: str, i: int, n: int, case: Case, outcome: _Outcome, time_limit: float) -> str:
    """The message of case ``i`` of ``n`` when the function gave no answer: too slow, stopped the
    program, or raised."""
    exc, where = outcome.error, f"case {i} of {n} ({case.what})"
    if outcome.timed_out:
        return (
            f"{name} did not finish {where} within the time limit of {time_limit:g} s per case: it probably loops "
            f"forever (a loop whose condition never changes, or a sleep). It keeps running in the background; "
            f"restart the kernel to stop it, fix the loop, then run the check again."
        )
    if isinstance(exc, WrongAnswer):  # the check could not compare the answer: say why
        return f"{name} is wrong on {where}:\n  {exc}"
    if isinstance(exc, SystemExit):
        return (
            f"{name} called exit ({type(exc).__name__}: {exc.code!r}) on {where}, arguments {_shown(case.args)}: "
            "a function hands back its answer with return; remove the exit() or sys.exit() call."
        )
    if isinstance(exc, KeyboardInterrupt):
        return (
            f"{name} raised KeyboardInterrupt on {where}, arguments {_shown(case.args)}: the function itself "
            "raised it (an interrupt from the keyboard stops the check, not the function); remove that raise."
        )
    return (
        f"{name} raised {type(exc).__name__}: {_error_text(exc)}\n"
        f"  on case {i} ({case.what}), arguments {_shown(case.args)}"
    )


def _is_bool(x: Any) -> bool:
    return isinstance(x, (bool, np.bool_))


def _type_problem(got: Any, want: Any) -> str | None:
    """Why ``got`` cannot be an answer of ``want``'s type (None when it can): a bool where a number
    is expected (Python counts True as 1), a list or a torch tensor where a numpy array is expected,
    and the same inside a tuple of several results."""
    kind = type(got).__module__.split(".")[0] + "." + type(got).__name__
    if _is_bool(got) and not _is_bool(want) and isinstance(want, (int, float, np.integer, np.floating)):
        return f"returned {got!r}, a bool, where a number is expected (Python counts True as 1); return the number."
    if isinstance(want, np.ndarray) and kind == "torch.Tensor":
        return "returned a torch tensor where a numpy array is expected; convert it with .detach().cpu().numpy()."
    if isinstance(want, np.ndarray) and isinstance(got, (list, tuple)):
        return f"returned a {type(got).__name__} where a numpy array is expected; return np.asarray(...) of it."
    if isinstance(want, tuple) and isinstance(got, (tuple, list)) and len(got) == len(want):
        return next((p for g, w in zip(got, want) if (p := _type_problem(g, w))), None)
    return None


def _safe(test: Callable[[Any, Case], bool], got: Any, case: Case) -> bool:
    try:
        return bool(test(got, case))
    except Exception:  # noqa: BLE001 - a hint that does not apply is not shown
        return False
