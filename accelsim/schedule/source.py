"""Rebuild the graph a schedule was compiled from (its `source`), so a saved schedule can be replayed,
validated against its graph and checked on real numbers."""
from __future__ import annotations

from accelsim import models
from accelsim.errors import AccelsimError, ScheduleError
from accelsim.graph.ir import Graph
from accelsim.passes import inference_graph
from accelsim.schedule.plan import Schedule, graph_hash
from accelsim.training import training_graph


def graph_for(schedule: Schedule) -> Graph:
    """The model graph named by `schedule.source`, checked against the schedule's graph hash."""
    src = schedule.source
    if src is None:
        raise ScheduleError(f"the schedule of {schedule.graph_name!r} does not record the model it was compiled "
                            "from; pass the graph explicitly")
    try:
        fwd = models.build(src.model, **src.options)
        graph = training_graph(fwd, **src.optimizer) if src.optimizer is not None else inference_graph(fwd)
    except AccelsimError as e:
        raise ScheduleError(f"the schedule's source (model {src.model!r}) does not rebuild: {e}") from None
    except TypeError as e:  # an unknown optimizer setting in an edited file
        raise ScheduleError(f"the schedule's source (model {src.model!r}) does not rebuild: {e}") from None
    if graph_hash(graph) != schedule.graph_hash:
        raise ScheduleError(f"rebuilding {src.model} from the schedule's source gives a different graph "
                            "than it was compiled for; recompile with `accelsim compile`")
    return graph
