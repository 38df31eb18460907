"""Where a sweep's points run: in this process (one worker), a local process pool ("spawn"), or a
Dask cluster (a LocalCluster, or a scheduler's tcp:// address). Each yields (point id, record) as
points finish; evaluate_point never raises for a point's own failure, so an exception here is the
executor's (a worker that died) and stops the sweep with the finished points saved."""
from __future__ import annotations

import logging
import os
import re
import socket
import sys
import threading
import time
from typing import Any, Iterator

from accelsim.errors import SweepError
from accelsim.dse.dask_probe import NotAScheduler, probe_scheduler
from accelsim.dse.deps import require
from accelsim.dse.evaluate import evaluate_point

MAX_WORKERS = 1024
DASK_CONNECT_TIMEOUT_S = 3
PARENT_POLL_S = 0.25
"""How often a pool worker checks that the sweep that started it is still alive."""
PR_SET_PDEATHSIG = 1
_DASK_ADDRESS = re.compile(r"(tcp|tls)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):([0-9]{1,5})")
START_SCHEDULER = ("start one with `dask scheduler` (it prints its tcp:// address) and workers with "
                   "`dask worker tcp://HOST:8786`, with accelsim installed where they run, or use --dask local "
                   "for a cluster on this machine")

Todo = list[tuple[str, dict[str, Any]]]


def check_workers(workers: Any) -> int:
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        raise SweepError(f"workers must be an integer from 1 to {MAX_WORKERS}, got {workers!r}")
    return workers


def check_dask_address(dask: Any) -> str | None:
    """None, "local", or a scheduler address tcp://HOST:PORT (tls:// too)."""
    if dask is None or dask == "local":
        return dask
    m = _DASK_ADDRESS.fullmatch(dask) if isinstance(dask, str) else None
    if m is None or not 1 <= int(m.group(3)) <= 65535:
        raise SweepError(f"--dask {str(dask)[:100]!r}: expected 'local' or a scheduler address tcp://HOST:PORT "
                         f"(port 1 to 65535), e.g. tcp://127.0.0.1:8786; {START_SCHEDULER}")
    return dask


def _died(pid: str, e: BaseException) -> SweepError:
    return SweepError(f"a worker failed while evaluating point {pid} ({type(e).__name__}: {e}); the points "
                      f"finished so far are saved; rerun the sweep to resume (a worker killed for memory? try "
                      f"fewer workers)")


class InProcess:
    """Points one after the other in this process (workers=1): nothing to start, easiest to debug."""

    def run(self, payload: dict[str, Any], todo: Todo) -> Iterator[tuple[str, dict[str, Any]]]:
        for pid, params in todo:
            yield pid, evaluate_point(payload, params)

    def close(self) -> None:
        pass


def _exit_with_parent(parent_pid: int, deathsig: bool) -> None:
    """A pool worker's initializer: end this worker when the sweep that started it dies, however it dies
    (kill -9 included), instead of waiting forever on a queue nobody writes. On Linux the kernel kills it
    (PR_SET_PDEATHSIG, asked only where the pool's creator is the main thread: the signal follows the
    thread that started the worker); everywhere a daemon thread polls the parent's pid. The pool's
    resource tracker ends by itself once the parent and every worker have gone."""
    if deathsig and sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the polling thread below still ends the worker
    if os.getppid() != parent_pid:  # the parent died before the death signal was armed
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="accelsim-parent-watch", daemon=True).start()


class LocalPool:
    """A ProcessPoolExecutor with the "spawn" context: fresh interpreters, no state forked from the
    parent (numba, threads), and the same on every platform. Each worker ends when this process dies."""

    def __init__(self, workers: int) -> None:
        import concurrent.futures
        import multiprocessing

        self._futures = concurrent.futures
        main = threading.current_thread() is threading.main_thread()
        self._pool = concurrent.futures.ProcessPoolExecutor(max_workers=workers,
                                                            mp_context=multiprocessing.get_context("spawn"),
                                                            initializer=_exit_with_parent,
                                                            initargs=(os.getpid(), main))

    def run(self, payload: dict[str, Any], todo: Todo) -> Iterator[tuple[str, dict[str, Any]]]:
        futures = {self._pool.submit(evaluate_point, payload, params): pid for pid, params in todo}
        yield from _records(futures, self._futures.as_completed)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _records(futures: dict[Any, str], as_completed: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """(point id, record) as each future finishes. evaluate_point never raises for a point's own failure,
    so an exception here is the executor's (BrokenProcessPool, KilledWorker, a lost connection, a
    pickling failure): it stops the sweep, and the points already finished are kept."""
    for future in as_completed(list(futures)):
        try:
            record = future.result()
        except Exception as e:  # noqa: BLE001 - the pool's or cluster's failure, not the point's
            raise _died(futures[future], e) from None
        yield futures[future], record


class DaskPool:
    """A dask.distributed Client: on a LocalCluster of `workers` single-threaded processes ("local"), or
    connected to a running scheduler, whose workers need accelsim installed."""

    def __init__(self, address: str, workers: int) -> None:
        distributed = require("dask.distributed", "dask")
        self._distributed = distributed
        self._cluster = None
        if address == "local":
            try:
                self._cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                                         dashboard_address=None, silence_logs=logging.ERROR)
            except (OSError, RuntimeError, TimeoutError) as e:
                raise SweepError(f"--dask local: could not start a Dask LocalCluster of {workers} worker(s) "
                                 f"({type(e).__name__}: {e}); try --workers without --dask") from None
            self._client = distributed.Client(self._cluster)
            return
        self._client = _connect(distributed, address)

    def run(self, payload: dict[str, Any], todo: Todo) -> Iterator[tuple[str, dict[str, Any]]]:
        futures = {self._client.submit(evaluate_point, payload, params, pure=False): pid for pid, params in todo}
        yield from _records(futures, self._distributed.as_completed)

    def close(self) -> None:
        self._client.close()
        if self._cluster is not None:
            self._cluster.close()


def _reason(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"


def _connect(distributed: Any, address: str) -> Any:
    """A Client of the scheduler at `address`, after a bounded probe that something there speaks Dask
    (dask_probe.py: distributed itself would trust any peer's message sizes); every failure is one
    SweepError naming the address and what answered."""
    m = _DASK_ADDRESS.fullmatch(address)
    scheme, host, port = m.group(1), m.group(2).strip("[]"), int(m.group(3))
    try:
        if scheme == "tcp":
            probe_scheduler(host, port, DASK_CONNECT_TIMEOUT_S)
        else:  # a tls:// peer's greeting is encrypted: reach it, and have the TLS settings to talk to it
            socket.create_connection((host, port), timeout=DASK_CONNECT_TIMEOUT_S).close()
            _require_tls_settings(distributed, address)
    except NotAScheduler as e:
        raise SweepError(f"--dask {address}: what answered there is not a Dask scheduler: {e}; {START_SCHEDULER}"
                         ) from None
    except OSError as e:
        raise SweepError(f"--dask {address}: cannot reach a Dask scheduler there within {DASK_CONNECT_TIMEOUT_S} s "
                         f"({_reason(e)}); {START_SCHEDULER}") from None
    try:
        return distributed.Client(address, timeout=DASK_CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as e:
        raise SweepError(f"--dask {address}: cannot reach a Dask scheduler there within {DASK_CONNECT_TIMEOUT_S} s "
                         f"({_reason(e)}); {START_SCHEDULER}") from None
    except Exception as e:  # noqa: BLE001 - MemoryError and decoding errors from a peer that only looked like one
        said = "answered the handshake but" if scheme == "tcp" else "accepted the connection but"
        raise SweepError(f"--dask {address}: the peer there {said} failed as a Dask scheduler "
                         f"({_reason(e)}); {START_SCHEDULER}") from None


def _require_tls_settings(distributed: Any, address: str) -> None:
    """SweepError unless dask's configuration holds the TLS settings a tls:// client needs (without them
    distributed fails deep inside with a TypeError about ssl_context)."""
    if distributed.security.Security().get_connection_args("client").get("ssl_context") is None:
        raise SweepError(f"--dask {address}: a tls:// Dask scheduler needs dask's TLS settings (distributed.comm.tls."
                         "ca-file, .client.cert and .client.key in dask's configuration, e.g. "
                         "~/.config/dask/distributed.yaml, or DASK_DISTRIBUTED__COMM__TLS__CA_FILE and friends), and "
                         "none are set; set them, or reach the scheduler over tcp:// (an SSH tunnel, for one)")


def make_executor(workers: int, dask: str | None) -> InProcess | LocalPool | DaskPool:
    if dask is not None:
        return DaskPool(dask, workers)
    return InProcess() if workers == 1 else LocalPool(workers)
