"""Every CUDA kernel compiles to PTX for a current GPU (cc 9.0): the simulator accepts code NVVM rejects.

compile_ptx needs numba's real CUDA target, which cannot load where the simulator is on (conftest
turns it on), so subprocesses with NUMBA_ENABLE_CUDASIM=0 compile the cases and report as JSON.
The distinct kernels are dealt round-robin into SHARDS subprocesses so that xdist workers share the
compiling; together the shards compile every registered case. No GPU is needed.
"""
import json
import os
import subprocess
import sys

import pytest

SHARDS = 4

# Distinct (kernel, signature) pairs in a fixed order: a kernel shared by several ops compiles once,
# in one shard, and every case naming it is reported by that shard.
_CASES_BY_SHARD = r"""
import json, sys
import accelsim.kernels.cuda  # registers the kernels and their PTX cases
from accelsim.kernels.registry import KERNELS, PTX_CASES

shards = int(sys.argv[1])
keys = sorted({(f.__module__, f.__qualname__, sig) for _, f, sig in PTX_CASES})
shard_of = {key: i % shards for i, key in enumerate(keys)}
cases = [(name, f, sig, shard_of[(f.__module__, f.__qualname__, sig)]) for name, f, sig in PTX_CASES]
"""

_LIST_CASES = _CASES_BY_SHARD + r"""
print(json.dumps({"cases": [[name, shard] for name, _, _, shard in cases], "ops": sorted(KERNELS["cuda"])}))
"""

_COMPILE_ONE_SHARD = _CASES_BY_SHARD + r"""
from numba import cuda

shard = int(sys.argv[2])
compiled, failed, done = [], {}, set()
for name, py_func, signature, s in cases:
    if s != shard:
        continue
    key = (id(py_func), signature)
    try:
        if key not in done:
            cuda.compile_ptx(py_func, signature, cc=(9, 0))
            done.add(key)
        compiled.append(name)
    except Exception as e:
        failed[name] = f"{type(e).__name__}: {e}"[-1500:]
print(json.dumps({"compiled": compiled, "failed": failed}))
"""


def _run(script: str, *args: int) -> dict:
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
    proc = subprocess.run([sys.executable, "-c", script, *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def registered() -> dict:
    """Every registered PTX case with the shard that compiles it, and the ops with a cuda kernel."""
    return _run(_LIST_CASES, SHARDS)


@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_cuda_kernel_compiles_to_ptx_for_cc90(shard, registered):
    report = _run(_COMPILE_ONE_SHARD, SHARDS, shard)
    expected = sorted(name for name, s in registered["cases"] if s == shard)
    assert expected, f"shard {shard} of {SHARDS} has no PTX cases"
    assert not report["failed"], "\n\n".join(f"{name}: {err}" for name, err in report["failed"].items())
    assert sorted(report["compiled"]) == expected


def test_every_registered_case_is_in_a_shard_that_compiles_it(registered):
    assert registered["cases"], "no PTX cases registered"
    assert {s for _, s in registered["cases"]} == set(range(SHARDS))


def test_every_cuda_op_has_ptx_cases_in_float32_and_float64(registered):
    cases = {(name.split(":")[0], name.rsplit("[", 1)[1].rstrip("]")) for name, _ in registered["cases"]}
    missing = [f"{op} ({dtype})" for op in registered["ops"] for dtype in ("float32", "float64")
               if (op, dtype) not in cases]
    assert not missing, f"cuda kernels without a compiled PTX case: {', '.join(missing)}"
