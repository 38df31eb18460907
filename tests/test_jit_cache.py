"""kernels/cpu/jit_cache.py: a kernel jitted with stamped_njit recompiles when a file it calls into changes,
where numba's own cache (keyed on the kernel's file alone) would keep serving the old machine code."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import accelsim

ROOT = Path(accelsim.__file__).resolve().parents[1]

_DEPENDENCY = """
from pathlib import Path
import numba
from accelsim.kernels.cpu.jit_cache import stamp_of
STAMP = stamp_of(Path(__file__).read_bytes())

@numba.njit(cache=True)
def formula(x):
    return x + {addend}
"""

_KERNEL = """
import dep
from accelsim.kernels.cpu.jit_cache import stamped_njit

@stamped_njit(dep.STAMP)
def kernel(x):
    return dep.formula(x)

print(kernel(1.0), kernel.stats.cache_hits.get(kernel.signatures[0], 0))
"""


def _run(tmp_path) -> tuple[float, int]:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "NUMBA_ENABLE_CUDASIM": "0",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    proc = subprocess.run([sys.executable, str(tmp_path / "kernel.py")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    value, hits = proc.stdout.split()
    return float(value), int(hits)


def test_a_stamped_kernel_recompiles_when_the_file_it_calls_into_changes(tmp_path):
    (tmp_path / "kernel.py").write_text(textwrap.dedent(_KERNEL))
    (tmp_path / "dep.py").write_text(textwrap.dedent(_DEPENDENCY.format(addend="1.0")))
    assert _run(tmp_path) == (2.0, 0)  # compiled
    assert _run(tmp_path) == (2.0, 1)  # loaded from the cache
    (tmp_path / "dep.py").write_text(textwrap.dedent(_DEPENDENCY.format(addend="20.0")))
    assert _run(tmp_path) == (21.0, 0)  # the stale entry is not served
