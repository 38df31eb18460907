"""kill -9 of a sweep running a process pool leaves no process behind: its workers and the pool's resource
tracker end with it, and a rerun resumes to the table a clean run gives. The sweep's processes are found by
a unique variable in their environment (/proc/PID/environ), so nothing else on the machine is touched."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from accelsim.dse import run_sweep

pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("pandas")

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux's /proc")]

REPO = Path(__file__).resolve().parents[2]
TAG = "ACCELSIM_HOSTILE_SWEEP_TAG"
SPEC = {"hw": "tpu_v1_like", "model": "mlp", "model_options": {"batch": 4, "sizes": [32, 16, 4]},
        "parameters": {"chips.0.units.mxu.array.rows": [16, 32, 64, 128], "options.microbatches": [1, 2]}}
START_LIMIT_S = 120  # bounds, not measurements: how long to wait for the sweep to get going / to be gone
GONE_LIMIT_S = 30

# run_sweep called from a thread other than the main one: there the workers cannot ask the kernel to kill
# them with their parent (the signal follows the thread that started them), so only their watch of the
# parent's pid ends them
_FROM_A_THREAD = """
import sys, threading
from accelsim.dse import run_sweep
t = threading.Thread(target=run_sweep, args=(sys.argv[1],), kwargs={"out": sys.argv[2], "workers": 2})
t.start()
t.join()
"""


def tagged(tag: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose environment holds TAG=tag (zombies are dead)."""
    found = []
    marker = f"{TAG}={tag}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")[:120]
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if state != "Z":
            found.append((int(entry), cmdline))
    return found


def kill_parent_and_expect_no_survivor(argv: list[str], out: Path) -> None:
    """Start `argv` in its own session with a unique tag, wait for its first finished point and its pool,
    kill -9 only the parent, then expect every tagged process gone (survivors are killed, by pid, then
    reported)."""
    tag = uuid.uuid4().hex
    env = {**os.environ, "PYTHONPATH": str(REPO), TAG: tag}
    proc = subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + START_LIMIT_S
        while not (list(out.glob("points/*.json")) and len(tagged(tag)) >= 3):  # the parent and two workers
            assert proc.poll() is None, f"the sweep ended early: {proc.stderr.read().decode()[-2000:]}"
            assert time.monotonic() < deadline, f"no point finished within {START_LIMIT_S} s"
            time.sleep(0.05)
        before = tagged(tag)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + GONE_LIMIT_S
        while (left := tagged(tag)) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        survivors = tagged(tag)
        for pid, _ in survivors:
            os.kill(pid, signal.SIGKILL)
    assert len(before) >= 3, before
    assert not left, f"left running {GONE_LIMIT_S} s after kill -9 of the sweep: {left}"


@pytest.fixture(scope="module")
def clean_table(tmp_path_factory):
    """The results of SPEC run without interruption (wall_s dropped)."""
    run = run_sweep(SPEC, out=tmp_path_factory.mktemp("clean"))
    return pq.read_table(run.results_path).to_pandas().drop(columns="wall_s")


def resumes_to_the_clean_table(spec: Path, out: Path, clean_table) -> None:
    finished = len(list(out.glob("points/*.json")))
    resumed = run_sweep(spec, out=out)
    assert resumed.reused >= finished and resumed.new + resumed.reused == 8
    got = pq.read_table(out / "results.parquet").to_pandas().drop(columns="wall_s")
    assert got.equals(clean_table)  # pandas: NaN equals NaN in the same place


def test_kill_9_of_the_cli_sweep_leaves_no_worker_and_no_resource_tracker(tmp_path, clean_table):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    out = tmp_path / "out"
    kill_parent_and_expect_no_survivor([sys.executable, "-m", "accelsim", "sweep", str(spec), "--out", str(out),
                                        "--workers", "2", "--no-plots", "--yes"], out)
    resumes_to_the_clean_table(spec, out, clean_table)


def test_kill_9_of_a_sweep_started_from_a_thread_leaves_no_worker(tmp_path, clean_table):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    out = tmp_path / "out"
    kill_parent_and_expect_no_survivor([sys.executable, "-c", _FROM_A_THREAD, str(spec), str(out)], out)
    resumes_to_the_clean_table(spec, out, clean_table)


def test_kill_9_of_a_sweep_on_a_local_dask_cluster_leaves_no_worker(tmp_path, clean_table):
    # dask.distributed's worker processes watch a pipe from the process that started them and exit when it
    # closes (distributed/process.py): kill -9 of the sweep takes its LocalCluster's workers with it
    pytest.importorskip("dask.distributed")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    out = tmp_path / "out"
    kill_parent_and_expect_no_survivor([sys.executable, "-m", "accelsim", "sweep", str(spec), "--out", str(out),
                                        "--workers", "2", "--dask", "local", "--no-plots", "--yes"], out)
    resumes_to_the_clean_table(spec, out, clean_table)
