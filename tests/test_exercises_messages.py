"""What a check says when an answer is wrong stays short: a message never prints whole arrays
(a reader once got some fifty lines of raw matrices under a one-line hint). It shows shapes, a
few entries and the largest difference, whatever the size of the arrays."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from corelib.exercises import Case, WrongAnswer, check_function


def _message(student, cases, **kw) -> str:
    with pytest.raises(AssertionError) as err:
        check_function(student, cases, name="f", **kw)
    return str(err.value)


def test_a_wrong_array_answer_is_summarised_with_its_largest_difference():
    big = np.arange(2500.0).reshape(50, 50)
    wrong = big.copy()
    wrong[7, 3] += 0.5
    message = _message(lambda m: wrong, [Case((big,), big, "a 50 x 50 matrix")])
    assert len(message.splitlines()) < 15 and len(message) < 1200
    assert "a (50, 50) array starting [" in message
    assert "1 of 2500 entries differ; the largest difference, 0.5, is at index (7, 3)" in message


def test_an_answer_of_the_wrong_shape_says_both_shapes():
    message = _message(lambda m: np.zeros((40, 30)), [Case((np.ones((30, 40)),), np.ones((30, 40)), "a matrix")])
    assert "shape (40, 30), expected shape (30, 40)" in message
    assert len(message.splitlines()) < 15


def test_an_error_on_large_arguments_shows_them_by_their_shape():
    def fails(a, b):
        raise ValueError("shapes do not match\n" + "\n".join(str(row) for row in a))  # a long message

    message = _message(fails, [Case((np.ones((12, 12)), np.ones((12, 12))), None, "two Gramians")])
    assert len(message.splitlines()) < 15 and len(message) < 1200
    shown = "a (12, 12) array starting [1., 1., 1., ...]"
    assert f"arguments ({shown}, {shown})" in message


def test_non_finite_entries_are_pointed_at():
    message = _message(lambda v: np.array([1.0, np.nan, 3.0]), [Case((0,), np.array([1.0, 2.0, 3.0]), "three")])
    assert "1 of 3 entries are not finite, e.g. at index 1" in message


def test_small_answers_are_shown_whole():
    message = _message(lambda v: np.array([1.0, 2.0]), [Case((0,), np.array([1.0, 2.5]), "two values")])
    assert "returned [1., 2.]" in message and "expected [1., 2.5]" in message


def test_an_answer_the_check_cannot_compare_is_called_wrong_not_an_error():
    def compare(x):
        raise WrongAnswer("your basis has 3 columns; a rank-2 core has 2.")

    message = _message(compare, [Case((0,), 0.0, "a case")])
    assert message == "f is wrong on case 1 of 1 (a case):\n  your basis has 3 columns; a rank-2 core has 2."


def test_the_function_works_on_copies_even_after_its_time_is_up():
    shared = np.arange(4.0)  # one array in two cases, as a module's cases may share one
    cases = [Case((shared,), np.arange(4.0), "first"), Case((shared,), np.arange(4.0), "second")]

    def in_place(x):
        x += 1.0  # changes its argument, then answers from it
        return x - 1.0

    assert check_function(in_place, cases, name="f")  # each case sees the array it was given
    assert shared.tolist() == [0.0, 1.0, 2.0, 3.0]
    done = threading.Event()

    def slow(x):
        time.sleep(0.5)  # past the time limit: the check moves on while this keeps running
        x[:] = 99.0
        done.set()
        return x

    assert "did not finish case 1 of 2" in _message(slow, cases, time_limit=0.05)
    assert done.wait(10.0)
    assert shared.tolist() == [0.0, 1.0, 2.0, 3.0] and cases[1].args[0] is shared
