"""The Python API and its flags, round three: Graph.const given its arguments the wrong way round or values it
cannot store, a pass list that names nothing (',,,'), and `check` of a step whose numbers overflow: each ends
in the project's own error (or report) naming what was wrong; never numpy's error from inside a message, a
silent no-op, or RuntimeWarnings on stderr."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import accelsim as A
from accelsim.passes import PASSES

pytestmark = pytest.mark.timeout(300)

MLP = ["--model", "mlp", "--batch", "2", "--set", "sizes=16,8,4"]


@pytest.fixture
def g():
    return A.Graph("g")


# -- Graph.const ----------------------------------------------------------------------------------------------
def test_const_with_a_name_first_and_an_array_as_dtype_says_the_value_comes_first(g, hostile):
    message = hostile.refuses(lambda: g.const("c", np.array([1.0, 2.0])), "graph 'g'", "dtype", "array([1., 2.])",
                              "the value 'c' comes first")
    assert "truth value" not in message


@pytest.mark.parametrize("dtype", ["bogus", "int32", "complex128", "bool", 5, object, "float16"])
def test_const_refuses_a_dtype_the_graph_cannot_hold(dtype, g, hostile):
    hostile.refuses(lambda: g.const(1.0, dtype), "graph 'g'", "dtype must be one of float32, float64, int64")


@pytest.mark.parametrize("value, words", [
    (None, ("needs a value", "None")),
    ("c", ("numbers of float32", "'c'")),
    ([1.0, "a"], ("numbers of float32",)),
    ({"a": 1}, ("numbers of float32", "dict")),
    ([[1.0, 2.0], [3.0]], ("numbers of float32",)),
])
def test_const_refuses_values_that_are_not_numbers(value, words, g, hostile):
    hostile.refuses(lambda: g.const(value), "graph 'g'", *words)


def test_const_refuses_an_integer_beyond_int64(g, hostile):
    hostile.refuses(lambda: g.const(10**30, "int64"), "numbers of int64", "OverflowError")


def test_const_message_of_a_huge_array_is_one_short_line(g, hostile):
    message = hostile.refuses(lambda: g.const(np.zeros((300, 300)), "complex64"), "dtype")
    assert "\n" not in message and len(message) < 400


def test_const_of_a_value_beyond_float32_is_inf_without_a_warning(g):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        v = g.const(1e308)
    assert v.dtype == "float32" and np.isinf(g.leaf_value(v.id))


def test_const_still_takes_the_dtypes_it_took(g):
    assert g.const(1.0, np.float64).dtype == "float64" and g.const([1, 2], "int64").shape == (2,)
    assert g.const(np.array([1.5, 2.5])).dtype == "float32"


# -- pass lists -------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def step():
    return A.training_graph(A.models.build("mlp", batch=2, sizes=(16, 8, 4)), optimizer="sgd", lr=0.01)


@pytest.mark.parametrize("passes", [",,,", ",", " , ,", "\t,\n"])
def test_a_pass_string_of_only_commas_is_refused_listing_the_passes(passes, step, hostile):
    hostile.refuses(lambda: A.optimize(step, passes), "names no pass", *list(PASSES)[:3])


def test_an_empty_pass_string_or_list_still_means_no_passes(step):
    assert len(A.optimize(step, "")) == len(step) and len(A.optimize(step, [])) == len(step)


def test_the_cli_refuses_optimize_of_only_commas(hostile):
    run = hostile.cli_refuses(["compile", *MLP, "--optimize", ",,,", "-o", "s.json"], "names no pass",
                              *list(PASSES)[:3], codes=(1,))
    assert run.err.count("\n") == 1


# -- check: numeric warnings in the report ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def overflowing():
    """A training step whose learning rate (1e308) does not fit float32: its update is inf."""
    train = A.training_graph(A.models.build("mlp", batch=2, sizes=(16, 8, 4)), optimizer="sgd", lr=1e308)
    return train, A.compile(train, "groq_like")


def test_check_of_an_overflowing_step_fails_with_its_warnings_in_the_report_not_on_stderr(overflowing):
    train, sched = overflowing
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a RuntimeWarning escaping check fails the test
        report = A.check(sched, backend="numpy", graph=train, hw="groq_like")
    assert not report.passed
    assert any("constant(s) hold inf" in w for w in report.warnings)
    assert any("invalid value" in w or "overflow" in w for w in report.warnings), report.warnings
    assert report.to_json()["warnings"] == list(report.warnings)


def test_check_of_a_sound_step_has_no_warnings(step):
    report = A.check(A.compile(step, "groq_like"), backend="numpy", graph=step, hw="groq_like")
    assert report.passed and report.warnings == ()


def test_the_cli_check_with_lr_1e308_prints_failed_and_no_runtime_warning(hostile, tmp_path):
    run = hostile.cli(["check", *MLP, "--lr", "1e308", "--backend", "numpy", "--json", tmp_path / "check.json"])
    assert run.code == 1 and "check FAILED" in run.out
    assert "RuntimeWarning" not in run.err and "encountered" not in run.err, run.err
    hostile.names(run.out, "numeric warning:", "hold inf")
    saved = json.loads((tmp_path / "check.json").read_text())
    assert saved["passed"] is False and saved["warnings"]
