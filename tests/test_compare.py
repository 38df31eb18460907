"""accelsim.compare: a NaN or infinity never compares as small, shapes never broadcast."""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from accelsim.compare import NEGLIGIBLE, first_mismatch, max_abs_err, max_rel_err, scale

NAN, INF = float("nan"), float("inf")


def test_identical_finite_tensors_have_zero_error_and_no_mismatch():
    x = np.array([[0.5, -2.0], [3.0, 0.0]])
    assert max_rel_err(x, x.copy()) == 0.0 and max_abs_err(x, x.copy()) == 0.0
    assert first_mismatch(x, x.copy(), tol=0.0) is None


def test_relative_error_is_scaled_by_the_largest_value_of_either_tensor():
    got, ref = np.array([1.0, 4.0]), np.array([1.5, 4.0])
    assert max_rel_err(got, ref) == pytest.approx(0.5 / 4.0)
    assert max_abs_err(got, ref) == pytest.approx(0.5)


def test_nan_where_the_reference_is_finite_is_an_infinite_error_at_its_index():
    got, ref = np.array([[0.1, 0.2], [0.3, NAN]]), np.array([[0.1, 0.2], [0.3, 0.1234]])
    assert max_rel_err(got, ref) == math.inf and max_abs_err(got, ref) == math.inf
    m = first_mismatch(got, ref, tol=1e-3)
    assert (m.reason, m.index, m.expected) == ("non-finite", (1, 1), 0.1234) and math.isnan(m.got)
    assert str(m) == "index (1, 1) is nan, expected 0.1234"


def test_finite_where_the_reference_is_nan_is_a_failure_of_the_reference():
    got, ref = np.array([0.1, 0.2, 0.3]), np.array([0.1, NAN, 0.3])
    assert max_rel_err(got, ref) == math.inf
    m = first_mismatch(got, ref, tol=1.0)
    assert (m.reason, m.index, m.got) == ("reference non-finite", (1,), 0.2)
    assert str(m) == "the reference itself is non-finite: nan at index (1,) (got 0.2)"


def test_nan_on_both_sides_at_the_same_place_never_agrees():
    x = np.array([1.0, NAN])
    assert max_rel_err(x, x.copy()) == math.inf
    assert max_rel_err(x, x.copy(), allow_inf=True) == math.inf
    assert first_mismatch(x, x.copy(), tol=1.0).reason == "reference non-finite"


def test_the_same_infinity_fails_by_default_and_agrees_only_when_allowed():
    """An overflowed value proves nothing, so inf == inf fails unless the caller expects infinities
    (a mask filled with -inf); the finite elements are still compared, at the finite elements' scale."""
    got, ref = np.array([-INF, 1.0, 2.0]), np.array([-INF, 1.0, 2.1])
    assert max_rel_err(got, ref) == math.inf
    assert first_mismatch(got, ref, tol=1.0).reason == "reference non-finite"
    assert max_rel_err(got, ref, allow_inf=True) == pytest.approx(0.1 / 2.1)
    assert first_mismatch(got, ref, tol=0.1, allow_inf=True) is None
    assert first_mismatch(got, ref, tol=0.01, allow_inf=True).index == (2,)


def test_opposite_infinities_and_inf_against_finite_fail_even_when_infinities_are_allowed():
    for got, ref in (([INF], [-INF]), ([INF], [1.0]), ([1.0], [INF])):
        assert max_rel_err(got, ref, allow_inf=True) == math.inf, (got, ref)
        assert first_mismatch(got, ref, tol=1.0, allow_inf=True) is not None, (got, ref)


def test_a_shape_mismatch_is_a_failure_not_a_broadcast():
    got, ref = np.ones((2, 3)), np.ones((3,))
    assert max_rel_err(got, ref) == math.inf and max_abs_err(got, ref) == math.inf
    m = first_mismatch(got, ref, tol=1.0)
    assert (m.reason, m.index, m.got_shape, m.expected_shape) == ("shape", None, (2, 3), (3,))
    assert str(m) == "shape (2, 3), expected (3,)"
    assert max_rel_err(np.ones((1,)), np.ones(())) == math.inf


def test_empty_tensors_agree_and_a_scalar_mismatch_has_an_empty_index():
    assert max_rel_err(np.zeros((0, 3)), np.zeros((0, 3))) == 0.0
    assert first_mismatch(np.zeros((0, 3)), np.zeros((0, 3)), tol=0.0) is None
    m = first_mismatch(np.float64(NAN), 2.5, tol=1.0)
    assert m.index == () and str(m) == "the value is nan, expected 2.5"


def test_floor_keeps_noise_on_a_near_zero_tensor_from_being_a_relative_error_of_one():
    got, ref = np.array([1e-12, -1e-12]), np.array([0.0, 0.0])
    assert max_rel_err(got, ref) == pytest.approx(1.0)
    assert max_rel_err(got, ref, floor=NEGLIGIBLE * 1.0) == pytest.approx(1e-9)
    assert first_mismatch(got, ref, tol=1e-6, floor=NEGLIGIBLE) is None
    with pytest.raises(ValueError, match="floor"):
        max_rel_err(got, ref, floor=NAN)


def test_all_zero_tensors_with_no_floor_agree():
    assert max_rel_err(np.zeros(3), np.zeros(3)) == 0.0


def test_float32_against_float64_is_compared_in_float64():
    ref = np.array([0.1, 0.2, 0.3], dtype=np.float64)
    got = ref.astype(np.float32)
    err = max_rel_err(got, ref)
    assert 0.0 < err < 1e-7
    assert first_mismatch(got, ref, tol=1e-6) is None
    assert first_mismatch(got, ref, tol=1e-10) is not None
    assert max_rel_err(np.array([NAN], dtype=np.float32), np.array([1.0])) == math.inf


def test_tolerance_inf_reports_only_finiteness_and_shape():
    assert first_mismatch([1.0, 100.0], [2.0, -5.0], tol=math.inf) is None
    assert first_mismatch([1.0, NAN], [2.0, -5.0], tol=math.inf).index == (1,)


def test_scale_ignores_non_finite_elements():
    assert scale(np.array([NAN, -3.0, INF]), np.array([2.0])) == 3.0
    assert scale() == 0.0 and scale(np.array([NAN])) == 0.0


FINITE = hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=5),
                    elements=st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False))


@given(x=FINITE)
def test_a_finite_tensor_has_zero_error_against_itself(x):
    assert max_rel_err(x, x.copy()) == 0.0
    assert first_mismatch(x, x.copy(), tol=0.0) is None


@given(x=FINITE, data=st.data())
def test_one_nan_anywhere_on_either_side_is_an_infinite_error_found_at_its_index(x, data):
    if x.size == 0:
        return
    flat = data.draw(st.integers(0, x.size - 1))
    poisoned = x.copy()
    poisoned.flat[flat] = NAN
    index = np.unravel_index(flat, x.shape)
    assert max_rel_err(poisoned, x) == math.inf and max_rel_err(x, poisoned) == math.inf
    assert first_mismatch(poisoned, x, tol=1.0).index == tuple(int(i) for i in index)
    assert first_mismatch(x, poisoned, tol=1.0).reason == "reference non-finite"
