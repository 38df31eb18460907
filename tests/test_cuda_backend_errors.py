"""What the cuda backend says when it cannot run on a machine with a GPU: a missing toolkit and a version
mismatch between numba-cuda and the packages beside it are different problems with different fixes."""
from __future__ import annotations

import pytest

from accelsim.kernels import registry


@pytest.fixture
def gpu_present(monkeypatch: pytest.MonkeyPatch):
    """A machine where numba.cuda sees a GPU and the simulator is off; the probe compile is what varies."""
    from numba import cuda

    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    monkeypatch.setattr(cuda, "is_available", lambda: True)
    registry._toolkit_problem.cache_clear()
    yield cuda
    registry._toolkit_problem.cache_clear()


def _probe_raises(monkeypatch: pytest.MonkeyPatch, cuda, error: Exception) -> None:
    def compile_ptx(*args, **kwargs):
        raise error
    monkeypatch.setattr(cuda, "compile_ptx", compile_ptx)


def test_a_version_mismatch_is_named_as_one_with_the_installed_versions(monkeypatch, gpu_present):
    # numba-cuda 0.30.4 beside numpy 2.5 (seen on an H200 machine): numpy no longer has row_stack
    _probe_raises(monkeypatch, gpu_present, AttributeError("module 'numpy' has no attribute 'row_stack'"))
    ok, why = registry.cuda_available()
    assert not ok
    assert "version mismatch" in why and "row_stack" in why
    assert "numba-cuda " in why and "numpy " in why  # the installed versions
    assert "CUDA toolkit cannot be loaded" not in why and "accelsim[cuda]" not in why


def test_a_missing_toolkit_still_says_how_to_install_it(monkeypatch, gpu_present):
    _probe_raises(monkeypatch, gpu_present, OSError("libnvvm.so: cannot open shared object file"))
    ok, why = registry.cuda_available()
    assert not ok
    assert "CUDA toolkit cannot be loaded" in why and "libnvvm.so" in why and "accelsim[cuda]" in why
