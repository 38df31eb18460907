"""Rebuild the graph a schedule was compiled from (its `source`), so a saved schedule can be replayed."""
from __future__ import annotations

from accelsim import models
from accelsim.errors import ScheduleError
from accelsim.graph.ir import Graph
from accelsim.passes import inference_graph
from accelsim.schedule.plan import Schedule, graph_hash
from accelsim.training import training_graph


def graph_for(schedule: Schedule) -> Graph:
    """The model graph named by `schedule.source`, checked against the schedule's graph hash."""
    src = schedule.source
    if not src.get("model"):
        raise ScheduleError(f"schedule of {schedule.graph_name!r} does not record the model it was compiled "
                            "from; pass the graph explicitly")
    fwd = models.build(src["model"], **src.get("options", {}))
    if src.get("training"):
        keys = ("optimizer", "lr", "momentum", "beta1", "beta2", "eps", "step")
        graph = training_graph(fwd, **{k: src[k] for k in keys if k in src})
    else:
        graph = inference_graph(fwd)
    if graph_hash(graph) != schedule.graph_hash:
        raise ScheduleError(f"rebuilding {src['model']} from the schedule's source gives a different graph "
                            "than it was compiled for; recompile with `accelsim compile`")
    return graph
