"""Size the work before it is built: an upper estimate of a compiled step's tasks and of the numpy bytes
one evaluation allocates, refused above a documented ceiling (Graph, options -> count or error)."""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from accelsim.errors import AccelsimError, FrontendError, GraphError, ScheduleError
from accelsim.graph.ir import NUMPY_BYTES, Graph


def _is_int(value: object) -> bool:
    """Python or numpy integers; never bool (True is not a count), never a float, even 2.0."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


@dataclass(frozen=True)
class Limits:
    """Documented ceilings on the work one call may build; raise them knowingly.

    max_tasks: tasks in one compiled step. Measured on the list scheduler (mlp on groq_like_x4,
    4k to 70k tasks): each task costs 5 to 7 KB of Python objects at the compiler's peak and 0.5 to
    3 ms, more per task as the step grows, so 250,000 tasks is about 1.5 GiB and many minutes; a
    million tasks would pass 6 GiB. The shipped examples compile steps of a few thousand tasks.
    max_tensor_bytes: numpy bytes of the tensors that one evaluation or check of a step computes, as
    if every tensor were live at once (see `estimate_eval_bytes`). Measured peaks of evaluating zoo
    models are 0.25x to 1.15x of that estimate (a convolution's im2col workspace comes on top), and
    a float32 check also keeps a float64 oracle and the kernels' arenas, so 4 GiB keeps a check
    within about 16 GiB.
    """

    max_tasks: int = 250_000
    max_tensor_bytes: int = 4 * 2**30
    max_flops: int = 2 * 10**12
    """Floating-point operations one gradient check may evaluate (the forward graph once per finite
    difference, two per coordinate): at numpy's ~50-150 GFLOP/s here, under about a minute."""

    def __post_init__(self) -> None:
        for key in ("max_tasks", "max_tensor_bytes", "max_flops"):
            value = getattr(self, key)
            if not _is_int(value) or value < 1:
                raise AccelsimError(f"Limits.{key} must be a positive integer, got {value!r}")


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class ReadLimits:
    """Ceilings on reading one model file (.onnx, .pt2), checked from sizes the file declares before anything
    is decoded, unpacked or computed; raise them knowingly.

    max_file_bytes: the bytes read for one model: an .onnx file with its external data files, or a .pt2
    archive, and the bytes its members unpack to (torch.export.save stores them uncompressed, so they are
    about the file's size). ResNet-50 in float32 is ~100 MB, GPT-2 small ~0.5 GB; 2 GiB keeps a read (bytes
    plus decoded weights) within a few GiB.
    max_tensor_elements / max_total_elements: the model zoo's ModelLimits (8 GiB / 64 GiB as float32).
    max_folded_elements: the largest value the ONNX importer computes from constants at import (shape
    arithmetic: exporters' are tens of elements), 256 MiB as float32; a product (MatMul, Gemm, Conv, Einsum)
    counts its multiply-adds, which bound both its time and its workspace.
    max_nodes: the nodes of one ONNX graph once its local functions are inlined (a transformer exports a
    few thousand); a file of nested functions can otherwise ask for 2**40 of them in a few hundred bytes.
    """

    max_file_bytes: int = 2 * 2**30
    max_tensor_elements: int = 2**31
    max_total_elements: int = 2**34
    max_folded_elements: int = 2**26
    max_nodes: int = 2**20

    def __post_init__(self) -> None:
        for key in ("max_file_bytes", "max_tensor_elements", "max_total_elements", "max_folded_elements",
                    "max_nodes"):
            value = getattr(self, key)
            if not _is_int(value) or value < 1:
                raise FrontendError(f"ReadLimits.{key} must be a positive integer, got {value!r}")

    @staticmethod
    def how_to_raise(key: str) -> str:
        """How a user raises limit `key`: its command-line flag (where it has one) and the Python option."""
        flag = READ_LIMIT_FLAGS.get(key)
        cli = f"`{flag} N` on the command line or " if flag else ""
        return f"raise the limit with {cli}`limits=ReadLimits({key}=N)` from Python"


READ_LIMIT_FLAGS = {"max_file_bytes": "--max-model-bytes", "max_folded_elements": "--max-folded-elements",
                    "max_nodes": "--max-model-nodes"}
"""The command-line flags of the ReadLimits a user may meet (`accelsim import`, and every --model)."""
DEFAULT_READ_LIMITS = ReadLimits()


def check_step_options(microbatches: object, data_parallel: object, pipeline_stages: object,
                       max_in_flight: object = None) -> None:
    """Each option is an integer >= 1 (max_in_flight may be None); else ScheduleError naming it."""
    given = {"microbatches": microbatches, "data_parallel": data_parallel, "pipeline_stages": pipeline_stages}
    if max_in_flight is not None:
        given["max_in_flight"] = max_in_flight
    for key, value in given.items():
        if not _is_int(value):
            raise ScheduleError(f"{key} must be an integer >= 1, got {value!r} ({type(value).__name__})")
        if value < 1:
            raise ScheduleError(f"{key} must be >= 1, got {value!r}")


def estimate_tasks(graph: Graph, microbatches: int, data_parallel: int, pipeline_stages: int, zero: int = 0) -> int:
    """The tasks `compile` builds for one step, in O(nodes + edges): exact without pipeline stages, ZeRO
    or split nodes; an upper estimate with stages or ZeRO.

    A node runs on the tensor-parallel ranks that compute it (compiler/planning/expand.py): once for a
    rank's own node, on each of the graph's t ranks for a replicated one (a tensor-parallel all-reduce:
    one member per rank). Per replica (d of them) and micro-batch (m): those copies of every forward or
    backward compute node. Per copy of a gradient that an update reads: m - 1 accumulations per replica,
    and one all-reduce member per replica when d > 1. Per copy of an update node: one task per replica.
    With pipeline stages, a copy of a tensor moves to at most one other chip per distinct consumer node
    and to at most p - 1 other chips, counted for every task that produces one (node tasks and each
    gradient's final sum). ZeRO (d > 1, compiler/planning/zero.py) reduce-scatters a gradient instead of
    all-reducing it, at stage 2 and 3 once per micro-batch; at stages 1 and 2 it all-gathers each updated
    parameter once, at stage 3 each parameter before its forward and its backward readers of every
    micro-batch: counted as if every parameter were sharded."""
    m, d, p = microbatches, data_parallel, pipeline_stages
    t = graph.tensor_parallel
    copies = [1 if n.rank >= 0 else t for n in graph.nodes]
    compute = [n for n in graph.nodes if not n.is_leaf]
    per_sample = sum(copies[n.id] for n in compute if n.phase != "update")
    per_step = sum(copies[n.id] for n in compute if n.phase == "update")
    grads = graph.gradient_nodes()
    grad_copies = sum(copies[g] for g in grads)
    tasks = per_sample * m * d + grad_copies * ((m - 1) * d + (d if d > 1 else 0)) + per_step * d
    if zero and d > 1:  # one gradient per trained parameter: its reductions, then its parameter's gathers
        tasks += grad_copies * d * ((m - 1 if zero >= 2 else 0) + (2 * m if zero == 3 else 1))
    if p > 1:
        consumers = [0] * len(graph.nodes)
        for n in compute:
            for i in set(n.inputs):
                consumers[i] += 1
        fan_out = [min(p - 1, c) * k for c, k in zip(consumers, copies)]
        tasks += sum(fan_out[n.id] * (d if n.phase == "update" else m * d) for n in compute)
        tasks += sum(fan_out[g] * d for g in grads)
    return tasks


def check_step_size(graph: Graph, microbatches: int, data_parallel: int, pipeline_stages: int,
                    limits: Limits = DEFAULT_LIMITS, zero: int = 0, tasks: int | None = None) -> int:
    """The task estimate of one step (`zero`: its ZeRO stage); ScheduleError when it exceeds `limits.max_tasks`.
    `tasks`: that estimate, where the caller made it already (estimating walks the whole graph)."""
    check_step_options(microbatches, data_parallel, pipeline_stages)
    _check_limits(limits)
    if tasks is None:
        tasks = estimate_tasks(graph, microbatches, data_parallel, pipeline_stages, zero)
    if tasks > limits.max_tasks:
        raise ScheduleError(
            f"compiling {graph.name} with microbatches={microbatches}, data_parallel={data_parallel}, "
            f"pipeline_stages={pipeline_stages} would build about {tasks:,} tasks (an upper estimate), above "
            f"the limit of {limits.max_tasks:,} (about 6 KB and a few ms each); use fewer micro-batches or "
            f"replicas, or raise the limit with `--max-tasks N` on the command line or "
            f"`limits=Limits(max_tasks=N)` from Python")
    return tasks


def graph_flops(graph: Graph) -> int:
    """Floating-point operations of one evaluation of every node of `graph` (the op registry's counts)."""
    from accelsim.ops.registry import get_op

    return sum(int(get_op(n.op).flops(n.shape, *(graph.nodes[i].shape for i in n.inputs), **n.attrs))
               for n in graph.nodes if not n.is_leaf)


def check_fd_work(graph: Graph, fd_coords: int, limits: Limits = DEFAULT_LIMITS) -> int:
    """FLOPs of central finite differences at up to `fd_coords` coordinates of every float input and
    trainable parameter of a forward graph (two evaluations each); GraphError above limits.max_flops."""
    _check_limits(limits)
    if not _is_int(fd_coords) or fd_coords < 0:
        raise GraphError(f"fd_coords must be an integer >= 0, got {fd_coords!r}")
    coords = sum(min(math.prod(n.shape), fd_coords) for n in graph.nodes
                 if (n.op == "input" and n.dtype != "int64") or n.trainable)
    flops = 2 * coords * graph_flops(graph)
    if flops > limits.max_flops:
        raise GraphError(
            f"finite differences of {graph.name} at {fd_coords} coordinates per tensor evaluate the graph "
            f"{2 * coords:,} times, about {flops:.3g} FLOPs, above the limit of {limits.max_flops:.3g}; use fewer "
            f"--fd-coords or a smaller model, or raise the limit with `--max-flops N` on the command line or "
            f"`limits=Limits(max_flops=N)` from Python")
    return flops


def estimate_eval_bytes(graph: Graph, samples: int = 1) -> int:
    """Numpy bytes of the tensors of `graph` evaluated on `samples` inputs, as if every tensor stayed
    live (evaluation frees a value after its last use, so the tensors never take more). Computed nodes
    and inputs count once per sample; parameters and constants once. Ops' temporary workspaces are
    not counted: the limit leaves headroom for them."""
    if not _is_int(samples) or samples < 1:
        raise GraphError(f"samples must be an integer >= 1, got {samples!r}")
    total = 0
    for n in graph.nodes:
        nbytes = math.prod(n.shape) * NUMPY_BYTES[n.dtype]
        total += nbytes * (1 if n.is_leaf and n.op != "input" else samples)
    return total


def check_eval_size(graph: Graph, samples: int = 1, limits: Limits = DEFAULT_LIMITS,
                    what: str = "evaluating") -> int:
    """The byte estimate of `estimate_eval_bytes`; GraphError when it exceeds `limits.max_tensor_bytes`."""
    _check_limits(limits)
    nbytes = estimate_eval_bytes(graph, samples)
    if nbytes > limits.max_tensor_bytes:
        per = f" ({samples:,} samples)" if samples != 1 else ""
        raise GraphError(
            f"{what} {graph.name}{per} would allocate about {bytes_str(nbytes)} of numpy arrays (an upper estimate), "
            f"above the limit of {bytes_str(limits.max_tensor_bytes)}; use a smaller batch or model, or raise the "
            f"limit with `--max-bytes N` on the command line or `limits=Limits(max_tensor_bytes=N)` from Python")
    return nbytes


def _check_limits(limits: object) -> None:
    if not isinstance(limits, Limits):
        raise AccelsimError(f"limits must be an accelsim.limits.Limits, got {limits!r}")


def bytes_str(nbytes: int) -> str:
    """A byte count as people read it: "1.5 GiB (1,610,612,736 bytes)"."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.1f} {unit} ({nbytes:,} bytes)"
    return f"{nbytes:,} bytes"


def check_tensor_parallel(graph: Graph, tensor_parallel: object) -> int:
    """The tensor-parallel degree to compile with: the graph's own (graph.tensor_parallel, from the ranks
    its builder gave its nodes); a value given must agree with it, since ranks are a property of how the
    model was built (Megatron-LM writes its layers for t ranks), not of compile."""
    built = graph.tensor_parallel
    if tensor_parallel is None:
        return built
    if not _is_int(tensor_parallel) or tensor_parallel < 1:
        raise ScheduleError(f"tensor_parallel must be an integer >= 1, got {tensor_parallel!r}")
    if int(tensor_parallel) != built:
        how = (f"build it with tensor_parallel={tensor_parallel} (models.build(name, tensor_parallel="
               f"{tensor_parallel}) or --tensor-parallel {tensor_parallel})" if built == 1 else
               f"it was built for tensor_parallel={built}")
        raise ScheduleError(f"graph {graph.name!r} has {built} tensor-parallel rank(s) but tensor_parallel="
                            f"{tensor_parallel} was asked for: {how}")
    return built


ZERO_STAGES = (0, 1, 2, 3)

FUSION_TILES = (2, 4, 8, 16)
"""The tile counts a layer-fusion pass exists for (passes/fuse_layers.py: one pass record each, fuse_layers_t<T>):
a schedule records the pass by name, so every count it may use is a record; the compiler's `fusion: auto`
chooses among them. Here, with the other bounds, so the step options read it without importing the passes."""


def check_zero(graph: Graph, zero: object, data_parallel: int) -> int:
    """A ZeRO stage: 0 (none), 1 (optimizer state sharded over the replicas), 2 (+ gradients), 3 (+
    parameters); stages above 0 shard a training step's state, so an inference graph is refused. With
    data_parallel=1 a stage is allowed and changes nothing (a shard of one replica is the whole, as in
    DeepSpeed): the schedule is zero=0's, recorded with the stage asked for."""
    if not _is_int(zero) or zero not in ZERO_STAGES:
        raise ScheduleError(f"zero must be one of {ZERO_STAGES} (the ZeRO stage: 0 none, 1 optimizer state, 2 + "
                            f"gradients, 3 + parameters sharded over the data-parallel replicas), an int (not a "
                            f"bool, float or string), got {zero!r}")
    if zero and not any(n.phase == "update" for n in graph.nodes):
        raise ScheduleError(f"zero={zero} shards a training step's gradients and optimizer state, but graph "
                            f"{graph.name!r} has no update (compile a training graph)")
    return int(zero)
