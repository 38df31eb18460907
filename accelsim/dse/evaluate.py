"""One sweep point: its values -> hardware, step graph and compiled schedule (`compile_point`), and the
metrics, config hash, feasibility and error of running it (`evaluate_point`, picklable for workers)."""
from __future__ import annotations

import time
from typing import Any

import numpy as np
from pydantic import ValidationError

from accelsim import models
from accelsim.errors import AccelsimError, MemoryFitError, SweepError
from accelsim.graph.ir import Graph
from accelsim.hw import load_hw
from accelsim.hw.spec import HwSpec
from accelsim.limits import DEFAULT_LIMITS, check_eval_size
from accelsim.passes import inference_graph
from accelsim.pydantic_errors import describe_errors
from accelsim.compiler import compile as compile_schedule
from accelsim.compiler.fusion import step_graph as fused_step_graph
from accelsim.compiler.hierarchy.step import task_schedule
from accelsim.schedule.plan import Schedule, hw_hash
from accelsim.dse.checks import constraints
from accelsim.dse.load import load_spec
from accelsim.dse.metrics import Outcome, measure, nan_metrics
from accelsim.dse.params import PointConfig, point_config
from accelsim.dse.spec import SweepSpec
from accelsim.remat import rematerialize
from accelsim.training import training_graph


def spec_payload(spec: SweepSpec) -> dict[str, Any]:
    """What a worker needs to evaluate points of `spec` (a loaded one): plain data, no files, so a Dask
    worker on another machine needs only accelsim installed."""
    return {"spec": spec.model_dump(mode="json", by_alias=True), "hw": spec._base_hw.model_dump(mode="json"),
            "source": spec.source}


def spec_from_payload(payload: dict[str, Any]) -> SweepSpec:
    """The spec of spec_payload, its base hardware restored (schema-validated only: load_spec checked it)."""
    spec = SweepSpec.model_validate(payload["spec"])
    spec._base_hw, spec._source = load_hw(payload["hw"]), payload["source"]
    return spec


def _config(spec: SweepSpec, params: dict[str, Any]) -> PointConfig:
    try:
        return point_config(spec, params)
    except ValidationError as e:
        raise SweepError("step options: " + "; ".join(describe_errors(e.errors()))) from None


def _hw(spec: SweepSpec, config: PointConfig) -> HwSpec:
    return load_hw(spec._base_hw, overrides=config.hw_overrides)


def _graph(spec: SweepSpec, config: PointConfig) -> Graph:
    """The step of `accelsim run`: the training step (forward, backward, update), rematerialized by
    options.remat, or the inference graph; a model built over options.tensor_parallel ranks, as
    --tensor-parallel builds it."""
    o = config.options
    model_options = dict(config.model_options)
    if o.tensor_parallel > 1:
        given = model_options.setdefault("tensor_parallel", o.tensor_parallel)
        if given != o.tensor_parallel:
            raise SweepError(f"options.tensor_parallel {o.tensor_parallel} and model.tensor_parallel {given} "
                             "disagree: set the ranks in one place (options.tensor_parallel)")
    forward = models.build(spec.model, **model_options)
    if not o.training:
        if o.remat is not None:
            raise SweepError(f"options.remat {o.remat} recomputes activations a training step keeps for its "
                             "backward pass; an inference step (options.training: false) has none")
        return inference_graph(forward)
    graph = training_graph(forward, optimizer=o.optimizer, lr=o.lr)
    return rematerialize(graph, o.remat) if o.remat is not None else graph


def _compile(graph: Graph, hw: HwSpec, config: PointConfig) -> Schedule:
    return task_schedule(compile_schedule(graph, hw, config.options.step()), "a sweep point")


def _plain_params(spec: SweepSpec, params: dict[str, Any]) -> dict[str, Any]:
    """A point's values as Python scalars (a results row holds numpy ones), its keys the spec's."""
    unknown = [k for k in params if k not in spec.parameters]
    if unknown:
        raise SweepError(f"{unknown[0]!r:.80} is not a parameter of sweep {spec.name!r} (its parameters: "
                         f"{', '.join(spec.parameters)})")
    return {k: v.item() if isinstance(v, np.generic) else v for k, v in params.items()}


def compile_point(spec: SweepSpec, params: dict[str, Any]) -> tuple[Schedule, HwSpec, Graph]:
    """Compile the point `params` ({parameter key: value}, e.g. from a results row; missing keys keep
    the spec's settings) as evaluate_point does; raises AccelsimError (a bad value, a step that does not
    fit, ...). `spec` may be unloaded: it is loaded (and checked) first."""
    if spec._base_hw is None:
        spec = load_spec(spec)
    config = _config(spec, _plain_params(spec, params))
    hw = _hw(spec, config)
    graph = _graph(spec, config)
    return _compile(graph, hw, config), hw, graph


def _internal(e: BaseException) -> str:
    return f"internal error: {type(e).__name__}: {e}"


def _run(spec: SweepSpec, params: dict[str, Any], record: dict[str, Any]) -> None:
    """Fill `record` as far as the point gets; raises what stops it."""
    from accelsim.report import run_summary

    config = _config(spec, params)
    hw = _hw(spec, config)
    record["config_hash"] = hw_hash(hw)
    graph = _graph(spec, config)
    o = config.options
    if o.check:  # sized before compiling, as `accelsim run --check` does
        check_eval_size(graph, samples=o.microbatches * o.data_parallel, limits=DEFAULT_LIMITS, what="checking")
    try:
        schedule = _compile(graph, hw, config)
    except MemoryFitError:
        record["fits"] = False
        raise
    record["fits"] = True
    graph, _ = fused_step_graph(graph, schedule)  # a fused step is the schedule of the fused graph
    summary = run_summary(schedule, hw)
    record["metrics"] = measure(Outcome(summary))  # kept if the replay or the check fails
    simulated = passed = None
    if o.simulate:
        from accelsim.api import simulate

        simulated = simulate(schedule, hw, graph=graph).makespan_cycles
    if o.check:
        from accelsim.api import check

        passed = check(schedule, graph=graph, hw=hw).passed
    record["metrics"] = measure(Outcome(summary, simulated, passed))


def evaluate_point(spec_data: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Evaluate one point (`spec_data` from spec_payload). Never raises for the point's own failure:
    returns {params, config_hash (None when the hardware did not resolve), metrics (every metric, NaN
    where missing), fits, feasible, error ("" when none), wall_s}."""
    start = time.perf_counter()
    record: dict[str, Any] = {"params": dict(params), "config_hash": None, "metrics": nan_metrics(),
                              "fits": False, "feasible": False, "error": ""}
    try:
        spec = spec_from_payload(spec_data)
        _run(spec, params, record)
        record["feasible"] = all(c.holds(record["metrics"], record["fits"]) for c in constraints(spec))
    except AccelsimError as e:
        record["error"] = str(e) or type(e).__name__
    except Exception as e:  # noqa: BLE001 - a bug must cost one point, not the sweep, and keep its message
        record["error"] = _internal(e)
    record["wall_s"] = time.perf_counter() - start
    return record
