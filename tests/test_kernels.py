"""Every op has a numba CPU and a CUDA kernel that match its numpy reference on random inputs.

Tolerances: float64 inputs, max relative error (scaled by the tensor's largest value) < 1e-10;
float32 inputs < 1e-4 (reductions over hundreds of terms lose ~1e-6 relative in float32).
CUDA runs under numba's simulator here (tests/conftest.py) and on a GPU when one is present.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.compare import first_mismatch, max_rel_err
from accelsim.kernels import get_kernel
from accelsim.ops import OPS

COMPUTE_OPS = sorted(n for n, op in OPS.items() if op.category != "leaf")
TOL = {"float32": 1e-4, "float64": 1e-10}
EXAMPLES = {"numba": 4, "cuda": 1}


def _cast(arrays, op, dtype):
    return tuple(np.asarray(a) if k in op.integer_inputs else np.asarray(a, dtype=dtype)
                 for k, a in enumerate(arrays))


def _check(name, backend, seed):
    op = OPS[name]
    kern = get_kernel(name, backend)
    for arrays, attrs in op.examples(np.random.default_rng(seed)):
        for dtype in ("float64", "float32"):
            args = _cast(arrays, op, dtype)
            expected = op.ref(*_cast(arrays, op, "float64"), **attrs)
            got = kern(*args, **attrs)
            assert np.shape(got) == np.shape(expected), f"{name} {backend} {dtype}: shape"
            assert np.asarray(got).dtype == args[op.dtype_from].dtype, f"{name} {backend} {dtype}: dtype"
            err = max_rel_err(got, expected)
            assert err < TOL[dtype], (f"{name} on {backend} in {dtype} {attrs}: rel err {err:.2e}, first bad: "
                                      f"{first_mismatch(got, expected, TOL[dtype])}")


@pytest.mark.parametrize("backend", ["numba", "cuda"])
@pytest.mark.parametrize("name", COMPUTE_OPS)
def test_kernel_matches_the_numpy_reference(name, backend):
    @settings(max_examples=EXAMPLES[backend], derandomize=True)  # deadline and too_slow: tests/conftest.py
    @given(seed=st.integers(0, 2**16))
    def run(seed):
        _check(name, backend, seed)
    run()


def test_small_calls_run_on_one_thread_and_numba_threads_are_restored():
    import numba

    from accelsim.kernels.cpu.threads import PARALLEL_MIN_ELEMENTS, sized

    seen = []

    def probe(*arrays):
        seen.append(numba.get_num_threads())
        return arrays[0]

    before = numba.get_num_threads()
    sized(probe)(np.zeros(16), np.zeros(16))
    sized(probe)(np.zeros(PARALLEL_MIN_ELEMENTS // 2), np.zeros(PARALLEL_MIN_ELEMENTS // 2))
    assert seen == [1, before] and numba.get_num_threads() == before
    assert get_kernel("add", "numba").__wrapped__ is not None  # the registry hands out the sized kernels
