"""Suite-wide settings. Timing policy: no test asserts a duration, because README's test command runs two
pytest workers on machines that may have two busy cores, where any single step can take several times its
idle time.

- A test that guards against a blow-up bounds the work done instead: Python steps and peak memory counted by
  tests/work_meter.py (the same on any machine), or a count the code reports. Speed itself is measured by
  the benchmarks in experiments/.
- pytest-timeout markers are hang guards only, at least ten times what the test takes on an idle core and
  never under 300 s; there is no suite-wide timeout, which the slowest correct test could reach.
- Hypothesis runs with the "accelsim" profile below: no per-example deadline and no too_slow health check
  (both measure time); the other health checks stay on, since they point at strategies that need fixing.
"""
import os

from hypothesis import HealthCheck, settings

# CUDA kernels run under numba's simulator unless a GPU run sets this to 0 first.
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

settings.register_profile("accelsim", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("accelsim")


def pytest_configure(config) -> None:
    """Import accelsim's public names and every CLI subcommand once, before any test: `import accelsim` is
    lazy, and a test that counts the Python steps of one call (tests/work_meter.py) must not count an import
    that an earlier test in the same worker may or may not have done."""
    import accelsim as A
    from accelsim.cli import make_parser

    make_parser()
    for name in A.__all__:
        getattr(A, name)
