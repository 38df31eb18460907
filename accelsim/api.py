"""The public entry points that load, validate and run a schedule: they accept the obvious forms of their
arguments and validate the schedule against its hardware, graph and plan before simulating or executing it,
so an edited or mismatched schedule is refused by name instead of producing numbers (A.load_schedule,
A.validate_schedule, A.simulate, A.check); and A.rematerialize, the training-step rewrite whose policy a
user picks by name. This module stands above the compiler: validating against the plan expands it again."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from accelsim.errors import AccelsimError, ScheduleError
from accelsim.gc_pause import paused_gc
from accelsim.graph.ir import Graph
from accelsim.hw import load_hw
from accelsim.hw.load import HwLike
from accelsim.hw.spec import HwSpec
from accelsim.compiler.verify import verify_schedule
from accelsim.schedule.hardware import hardware_of
from accelsim.schedule.io import read_schedule
from accelsim.schedule.plan import Schedule
from accelsim.schedule.validate import validate_schedule as validate_contract



def resolve(schedule: Schedule, hw: HwLike = None, graph: Graph | None = None) -> tuple[HwSpec, Graph]:
    """The hardware (default: the bundled config the schedule names) and the graph (default: rebuilt
    from the schedule's source when it has one), after validating the schedule against both."""
    if not isinstance(schedule, Schedule):
        raise AccelsimError(f"expected a Schedule (from A.compile or A.load_schedule), got {type(schedule).__name__}")
    if graph is not None and not isinstance(graph, Graph):
        raise AccelsimError(f"graph must be an accelsim Graph, got {type(graph).__name__}")
    # an HwSpec comes back as it is; by name, the hardware the schedule was compiled for (with its overrides)
    hw = load_hw(hw) if hw is not None else hardware_of(schedule)
    if graph is None:
        if schedule.source is None:
            raise ScheduleError(f"the schedule of {schedule.graph_name!r} does not record the model it was compiled "
                                "from, so it cannot be checked against its graph: pass graph= (the Graph given to "
                                "A.compile)")
        from accelsim.source import graph_for
        graph = graph_for(schedule)
    verify_schedule(schedule, graph, hw)
    return hw, graph


def validate_schedule(schedule: Schedule, graph: Graph | None = None, hw: HwSpec | None = None) -> None:
    """Raise ScheduleError listing every violated rule: the schedule's own consistency always; with `graph`
    and/or `hw` that it fits them; with both, also that it is exactly a timing of the plan the compiler
    expands for them (an edited or stale schedule is refused)."""
    if graph is not None and hw is not None and isinstance(graph, Graph) and isinstance(hw, HwSpec):
        verify_schedule(schedule, graph, hw)
    else:
        validate_contract(schedule, graph, hw)


def load_schedule(path: str | Path, graph: Graph | None = None, hw: HwSpec | None = None) -> Schedule:
    """Read a schedule written by save_schedule and validate it (validate_schedule): its own consistency
    always, and with `graph` and `hw` that it is the compiler's plan for them."""
    schedule = read_schedule(path)
    try:
        validate_schedule(schedule, graph, hw)
    except ScheduleError as e:
        raise ScheduleError(f"{path}: {e}") from None
    return schedule


def simulate(schedule: Schedule, hw: HwLike = None, mode: str = "static", graph: Graph | None = None,
             port_contention: bool = True):
    """Validate `schedule` against `hw` and its graph, then play it in SimPy (static replay, or seed
    001's dynamic work queue with mode="dynamic"). Returns a sim.Result."""
    from accelsim.sim import MODES
    from accelsim.sim import simulate as run

    if mode not in MODES:
        raise AccelsimError(f"mode must be one of {MODES}, got {mode!r}")
    if not isinstance(port_contention, bool):
        raise AccelsimError(f"port_contention must be True or False, got {port_contention!r}")
    hw, _ = resolve(schedule, hw, graph)
    with paused_gc():
        return run(schedule, hw, mode=mode, port_contention=port_contention)


def check(schedule: Schedule, backend: str = "numba", graph: Graph | None = None, hw: HwLike = None):
    """Validate `schedule`, execute it with `backend` kernels through its memory placements and compare
    every output, the averaged gradients and the updated parameters with a float64 reference."""
    from accelsim.execute.check import check as run_check
    from accelsim.kernels.registry import BACKENDS

    if backend not in BACKENDS:
        raise AccelsimError(f"backend must be one of {BACKENDS}, got {backend!r}")
    hw, graph = resolve(schedule, hw, graph)
    return run_check(schedule, backend=backend, graph=graph, hw=hw)


def rematerialize(graph: Graph, policy: Any) -> Graph:
    """`graph` (a training step) with forward activations recomputed in the backward pass instead of kept:
    policy "none" (the identity), "sqrt" (checkpoint every ceil(sqrt(n)) of n layers), "every:K" or
    "budget:BYTES" (e.g. "budget:64MiB": recompute until the estimated peak of computed tensors fits), or an
    accelsim.remat.RematPolicy. Outputs, gradients and updates are bit-identical; the result records the
    rewrite in its `passes`, so a schedule compiled from it rebuilds it (accelsim.remat)."""
    from accelsim.remat import rematerialize as run

    return run(graph, policy)
