"""SimPy simulation of a compiled schedule (Schedule, HwSpec -> Result), in one of two modes:

static: the schedule's own order and placement, time-triggered (sim/static.py).
dynamic: seed 001's work-queue runtime on the schedule's task DAG (sim/dynamic.py).

Both read only the Schedule and the HwSpec: nothing of the scheduler's planning code, no graph.
"""
from __future__ import annotations

from accelsim.errors import AccelsimError
from accelsim.hw.spec import HwSpec
from accelsim.schedule.plan import Schedule
from accelsim.sim.dynamic import run_work_queue
from accelsim.sim.machine import SimulationError
from accelsim.sim.static import replay
from accelsim.sim.trace import Result

MODES = ("static", "dynamic")

__all__ = ["MODES", "SimulationError", "simulate"]


def simulate(schedule: Schedule, hw: HwSpec, mode: str = "static", port_contention: bool = True) -> Result:
    """Play `schedule` on `hw` (static), or run its task DAG with a dynamic work queue (dynamic).

    The raw engine: it trusts its input. The public `accelsim.simulate` validates the schedule
    against the hardware and the graph first. `port_contention=False` (static) gives every task its
    port's full bandwidth, to see what contention costs a schedule compiled for other hardware.
    Raises SimulationError naming the blocked tasks if the simulated machine deadlocks."""
    if mode not in MODES:
        raise AccelsimError(f"mode must be one of {MODES}, got {mode!r}")
    if mode == "dynamic":
        if not port_contention:  # it was ignored: a contended run returned as the uncontended one asked for
            raise AccelsimError("port_contention=False gives each task of the static replay its port's full "
                                "bandwidth; the dynamic runtime always shares ports between the tasks it runs at "
                                "once: simulate with mode='static' to see what contention costs")
        return run_work_queue(schedule, hw)
    return replay(schedule, hw, port_contention)
