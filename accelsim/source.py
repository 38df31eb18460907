"""Rebuild the graph a schedule was compiled from (its `source`: model -> training or inference graph ->
the recorded rewrite passes, rematerialization among them), so a saved schedule can be replayed,
validated against its graph and checked on real numbers."""
from __future__ import annotations

from pathlib import Path

from accelsim import models
from accelsim.errors import AccelsimError, ScheduleError
from accelsim.graph.ir import Graph
from accelsim.graph.provenance import AppliedPass
from accelsim.passes import PASSES, inference_graph, optimize_with_log
from accelsim.remat import REMAT_PASS, replay as replay_remat
from accelsim.schedule.plan import Schedule, Source, SourcePass, graph_hash
from accelsim.training import training_graph


def graph_for(schedule: Schedule) -> Graph:
    """The model graph named by `schedule.source`, its passes replayed, checked against the schedule's
    graph hash (the proof that the rebuilt graph is the one compiled). A source without an optimizer is
    an inference step, or the forward graph itself compiled as it was built (its loss included, as
    `A.compile(A.models.build(...), hw)` compiles it): the source does not say which, so both are rebuilt
    and the hash picks the one compiled."""
    src = schedule.source
    if src is None:
        raise ScheduleError(f"the schedule of {schedule.graph_name!r} does not record the model it was compiled "
                            "from; pass the graph explicitly")
    if src.model_file is not None:
        candidates, src = _from_model_file(src)
    else:
        try:
            # shapes only: replaying evaluates nothing, and a check sizes its own tensors (check_eval_size)
            fwd = models.build(src.model, limits=None, **src.options)
            candidates = [training_graph(fwd, **src.optimizer)] if src.optimizer is not None else _steps_of(fwd)
        except AccelsimError as e:
            raise ScheduleError(f"the schedule's source (model {src.model!r}) does not rebuild: {e}") from None
        except TypeError as e:  # an unknown optimizer setting in an edited file
            raise ScheduleError(f"the schedule's source (model {src.model!r}) does not rebuild: {e}") from None
    failure: ScheduleError | None = None
    for graph in candidates:
        try:
            graph = _replay(graph, src) if src.passes else graph
        except ScheduleError as e:  # the other candidate may be the one the passes applied to
            failure = failure or e
            continue
        if graph_hash(graph) == schedule.graph_hash:
            return graph
    if failure is not None:
        raise failure
    passes = f" and replaying its {len(src.passes)} pass(es)" if src.passes else ""
    what = f"model file {src.model_file[0]}" if src.model_file is not None else src.model
    raise ScheduleError(f"rebuilding {what} from the schedule's source{passes} gives a different graph "
                        "than it was compiled for; recompile with `accelsim compile`")


def _steps_of(fwd: Graph) -> list[Graph]:
    """The steps a forward graph without an optimizer may have been compiled as: its inference graph (what
    the CLI compiles with --inference), or, when it has a loss, the graph itself."""
    steps = [inference_graph(fwd)] if any(o != "loss" for o in fwd.outputs) else []
    return steps + ([fwd] if fwd.loss is not None or not steps else [])


def _from_model_file(src: Source) -> tuple[list[Graph], Source]:
    """The step graphs (one, or two for a forward graph: see graph_for) rebuilt from the model file the source names, refused unless the file still has the bytes
    it was compiled from; and the source with the passes the file's own graph already holds removed (a saved
    training step or optimized graph is the step, not a forward graph to train again)."""
    from accelsim.frontends.model_file import file_sha256, load_model

    path, sha = src.model_file
    if not Path(path).is_file():
        raise ScheduleError(f"the schedule was compiled from model file {path}, which is gone; restore the file or "
                            "recompile with `accelsim compile`")
    try:
        now = file_sha256(path)
        if now != sha:
            raise ScheduleError(f"model file {path} has changed since the schedule was compiled from it (sha256 "
                                f"{sha[:12]}... then, {now[:12]}... now); restore the file or recompile with "
                                "`accelsim compile`")
        fwd = load_model(path, **({"loss": src.options["loss"]} if "loss" in src.options else {}))
        if fwd.optimizer is not None:
            graphs = [fwd]
            if fwd.optimizer.kwargs() != src.optimizer:
                raise ScheduleError(f"model file {path} holds a training step with optimizer settings "
                                    f"{fwd.optimizer.kwargs()}, but the schedule records {src.optimizer}")
        else:
            graphs = [training_graph(fwd, **src.optimizer)] if src.optimizer is not None else _steps_of(fwd)
    except ScheduleError:
        raise
    except (AccelsimError, TypeError) as e:
        raise ScheduleError(f"the schedule's source (model file {path}) does not rebuild: {e}") from None
    done = tuple(SourcePass(name=p.name, only=p.only) for p in graphs[0].passes)
    if src.passes[:len(done)] != done:
        raise ScheduleError(f"model file {path} holds a graph rewritten by {[p.label for p in graphs[0].passes]}, which "
                            "the schedule's recorded passes do not start with; recompile with `accelsim compile`")
    return graphs, src.model_copy(update={"passes": src.passes[len(done):]})


def _replay(graph: Graph, src: Source) -> Graph:
    """`graph` rewritten by the source's passes in order, each of which must apply exactly where recorded
    (not verified numerically again: the hash check that follows is the proof). A rematerialization
    (REMAT_PASS, `only` = the recomputed forward ids) is replayed by accelsim.remat between the others."""
    run: list[tuple[int, AppliedPass]] = []  # consecutive rewrite passes, replayed by the pass manager at once
    for k, p in enumerate(src.passes):
        if p.name == REMAT_PASS:
            graph = _replay_passes(graph, src, run)
            run = []
            try:
                graph = replay_remat(graph, p.only or ())
            except AccelsimError as e:
                raise ScheduleError(f"the schedule's source: replaying its step {k + 1} of {len(src.passes)} "
                                    f"({REMAT_PASS}) on {src.model} fails: {e}; recompile with `accelsim compile`") \
                    from None
            continue
        if p.name not in PASSES:
            raise ScheduleError(f"the schedule's source records pass {p.name!r} (step {k + 1} of "
                                f"{len(src.passes)}), which this accelsim does not know (known: "
                                f"{', '.join(PASSES)}, {REMAT_PASS}); recompile with `accelsim compile`")
        run.append((k, AppliedPass(p.name, p.only)))
    return _replay_passes(graph, src, run)


def _replay_passes(graph: Graph, src: Source, run: list[tuple[int, AppliedPass]]) -> Graph:
    """`graph` rewritten by the rewrite passes of `run` (their step numbers in the source, and the passes)."""
    if not run:
        return graph
    try:
        out, log = optimize_with_log(graph, [p for _, p in run], verify=False)
    except AccelsimError as e:
        raise ScheduleError(f"the schedule's source: replaying its passes on {src.model} fails: {e}") from None
    for (k, _), r in zip(run, log.records):
        if r.status != "applied":
            why = r.reason or "nothing matched"
            raise ScheduleError(f"the schedule's source: its pass {r.label} (step {k + 1} of {len(src.passes)}) "
                                f"does not apply to the rebuilt {src.model} graph ({r.status}: {why}); recompile "
                                "with `accelsim compile`")
    return out
