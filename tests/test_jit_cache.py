"""kernels/cpu/jit_cache.py: a kernel jitted with stamped_njit recompiles when a file it calls into changes,
where numba's own cache (keyed on the kernel's file alone) would keep serving the old machine code."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import accelsim

JIT_CACHE = Path(accelsim.__file__).resolve().parent / "kernels" / "cpu" / "jit_cache.py"

# The module under test, loaded from its file alone: importing it as accelsim.kernels.cpu.jit_cache would run
# the package's __init__, which compiles every CPU kernel into this test's empty cache first (minutes of CPU).
_STAMPING = """
import importlib.util
_spec = importlib.util.spec_from_file_location("jit_cache", {path!r})
jit_cache = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(jit_cache)
stamp_of, stamped_njit = jit_cache.stamp_of, jit_cache.stamped_njit
"""

_DEPENDENCY = """
from pathlib import Path
import numba
from stamping import stamp_of
STAMP = stamp_of(Path(__file__).read_bytes())

@numba.njit(cache=True)
def formula(x):
    return x + {addend}
"""

_KERNEL = """
import dep
from stamping import stamped_njit

@stamped_njit(dep.STAMP)
def kernel(x):
    return dep.formula(x)

print(kernel(1.0), kernel.stats.cache_hits.get(kernel.signatures[0], 0))
"""


def _run(tmp_path) -> tuple[float, int]:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "NUMBA_ENABLE_CUDASIM": "0",
           "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, str(tmp_path / "kernel.py")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    value, hits = proc.stdout.split()
    return float(value), int(hits)


def test_a_stamped_kernel_recompiles_when_the_file_it_calls_into_changes(tmp_path):
    (tmp_path / "stamping.py").write_text(_STAMPING.format(path=str(JIT_CACHE)))
    (tmp_path / "kernel.py").write_text(textwrap.dedent(_KERNEL))
    (tmp_path / "dep.py").write_text(textwrap.dedent(_DEPENDENCY.format(addend="1.0")))
    assert _run(tmp_path) == (2.0, 0)  # compiled
    assert _run(tmp_path) == (2.0, 1)  # loaded from the cache
    (tmp_path / "dep.py").write_text(textwrap.dedent(_DEPENDENCY.format(addend="20.0")))
    assert _run(tmp_path) == (21.0, 0)  # the stale entry is not served
