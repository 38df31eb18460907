"""Every CUDA kernel compiles to PTX for a current GPU (cc 9.0): the simulator accepts code NVVM rejects.

compile_ptx needs numba's real CUDA target, which cannot load where the simulator is on (conftest
turns it on), so one subprocess with NUMBA_ENABLE_CUDASIM=0 compiles every case and reports as JSON.
No GPU is needed.
"""
import json
import os
import subprocess
import sys

import pytest

_COMPILE_EVERY_CASE = r"""
import json
from numba import cuda
import accelsim.kernels.cuda  # registers the kernels and their PTX cases
from accelsim.kernels.registry import KERNELS, PTX_CASES

compiled, failed, done = [], {}, set()
for name, py_func, signature in PTX_CASES:
    key = (id(py_func), signature)  # a kernel shared by several ops compiles once
    try:
        if key not in done:
            cuda.compile_ptx(py_func, signature, cc=(9, 0))
            done.add(key)
        compiled.append(name)
    except Exception as e:
        failed[name] = f"{type(e).__name__}: {e}"[-1500:]
print(json.dumps({"compiled": compiled, "failed": failed, "ops": sorted(KERNELS["cuda"])}))
"""


@pytest.fixture(scope="module")
def report() -> dict:
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
    proc = subprocess.run([sys.executable, "-c", _COMPILE_EVERY_CASE], env=env, capture_output=True, text=True,
                          timeout=1200)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_cuda_kernel_compiles_to_ptx_for_cc90(report):
    assert report["compiled"], "no PTX cases registered"
    assert not report["failed"], "\n\n".join(f"{name}: {err}" for name, err in report["failed"].items())


def test_every_cuda_op_has_ptx_cases_in_float32_and_float64(report):
    cases = {(name.split(":")[0], name.rsplit("[", 1)[1].rstrip("]")) for name in report["compiled"]}
    missing = [f"{op} ({dtype})" for op in report["ops"] for dtype in ("float32", "float64")
               if (op, dtype) not in cases]
    assert not missing, f"cuda kernels without a compiled PTX case: {', '.join(missing)}"
