"""Work limits: task and byte estimates bound what is built, and refusals come fast with the estimate."""

import numpy as np
import pytest

import accelsim as A
from accelsim.cli import main
from accelsim.errors import AccelsimError, GraphError, ScheduleError
from accelsim.graph.ir import Graph
from accelsim.limits import (DEFAULT_LIMITS, Limits, check_eval_size, check_step_options, check_step_size,
                             estimate_eval_bytes, estimate_tasks)
from accelsim.ops import matmul
from accelsim.passes import inference_graph
from work_meter import WorkMeter

MLP = {"batch": 2, "sizes": (16, 8, 4)}


@pytest.fixture(scope="module")
def x4():
    return A.load_hw("groq_like_x4")


def _graph(model, opts, optimizer):
    fwd = A.models.build(model, **opts)
    return inference_graph(fwd) if optimizer is None else A.training_graph(fwd, optimizer=optimizer)


@pytest.mark.parametrize("model, opts, optimizer, m, d, p", [
    ("mlp", MLP, "sgd", 1, 1, 1),
    ("mlp", MLP, "sgd", 3, 2, 1),
    ("mlp", MLP, "adam", 2, 1, 2),
    ("regression", {}, "momentum", 2, 2, 2),
    ("superres", {"batch": 1}, "sgd", 2, 1, 4),
    ("transformer_block", {}, "adam", 2, 4, 1),
    ("resnet_block", {}, None, 3, 1, 2),
])
def test_task_estimate_is_an_upper_bound_of_the_compiled_step(model, opts, optimizer, m, d, p, x4):
    """Unsplit, the estimate bounds the step; split, the estimate plus the parts compile counts first
    (schedule/compile._split_extra_tasks) does."""
    from accelsim.compiler.compile import _split_extra_tasks
    graph = _graph(model, opts, optimizer)
    schedule = A.compile(graph, x4, microbatches=m, data_parallel=d, pipeline_stages=p, split=False)
    assert len(schedule.tasks) <= estimate_tasks(graph, m, d, p)
    split = A.compile(graph, x4, microbatches=m, data_parallel=d, pipeline_stages=p, split=True)
    extra = _split_extra_tasks(graph, x4, split.options)
    assert len(split.tasks) <= estimate_tasks(graph, m, d, p) + extra


def test_one_microbatch_on_one_replica_is_one_task_per_compute_node():
    graph = _graph("mlp", MLP, "sgd")
    assert estimate_tasks(graph, 1, 1, 1) == sum(not n.is_leaf for n in graph.nodes)


def test_task_estimate_grows_with_microbatches_and_replicas():
    graph = _graph("mlp", MLP, "sgd")
    one = estimate_tasks(graph, 1, 1, 1)
    assert estimate_tasks(graph, 4, 1, 1) > 3 * one // 2 and estimate_tasks(graph, 1, 4, 1) > 3 * one // 2


@pytest.mark.parametrize("option", ["microbatches", "data_parallel"])
def test_a_million_is_refused_from_the_estimate_alone(option):
    graph = _graph("mlp", MLP, "sgd")
    options = {"microbatches": 1, "data_parallel": 1, "pipeline_stages": 1, option: 10**6}
    with WorkMeter(max_steps=100_000), pytest.raises(ScheduleError) as e:  # ~500 Python steps: nothing built
        check_step_size(graph, **options)
    message = str(e.value)
    assert f"{option}=1000000" in message and f"{estimate_tasks(graph, **options):,}" in message
    assert f"{DEFAULT_LIMITS.max_tasks:,}" in message and "--max-tasks" in message and "Limits(max_tasks" in message


@pytest.mark.parametrize("flag", ["--microbatches", "--data-parallel"])
def test_cli_refuses_a_million_before_compiling(flag, capsys):
    with WorkMeter(max_steps=1_000_000):  # ~130k Python steps, most of them building the mlp and loading the hw
        code = main(["compile", "--hw", "groq_like", "--model", "mlp", "--set", "batch=2", "--set", "sizes=16,8,4",
                     flag, "1000000", "-o", "never.json"])
    err = capsys.readouterr().err
    assert code == 1 and "limit" in err and "--max-tasks" in err and "Traceback" not in err


def test_a_raised_limit_lets_the_estimate_through():
    graph = _graph("mlp", MLP, "sgd")
    need = estimate_tasks(graph, 8, 1, 1)
    with pytest.raises(ScheduleError):
        check_step_size(graph, 8, 1, 1, Limits(max_tasks=need - 1))
    assert check_step_size(graph, 8, 1, 1, Limits(max_tasks=need)) == need


@pytest.mark.parametrize("value", [2.5, 2.0, np.float64(2.0), True, 0, -1, "2", None])
def test_step_options_must_be_integers_of_at_least_one(value):
    with pytest.raises(ScheduleError, match="microbatches"):
        check_step_options(value, 1, 1)


@pytest.mark.parametrize("key", ["data_parallel", "pipeline_stages", "max_in_flight"])
def test_every_step_option_is_checked_by_name(key):
    options = {"microbatches": 1, "data_parallel": 1, "pipeline_stages": 1, key: 0}
    with pytest.raises(ScheduleError, match=f"{key} must be >= 1, got 0"):
        check_step_options(**options)


def test_numpy_integers_and_no_window_are_accepted():
    check_step_options(np.int64(2), 1, np.int32(1), max_in_flight=None)


@pytest.mark.parametrize("kwargs", [{"max_tasks": 0}, {"max_tensor_bytes": -1}, {"max_tasks": 1.5},
                                    {"max_tensor_bytes": True}])
def test_limits_themselves_must_be_positive_integers(kwargs):
    with pytest.raises(AccelsimError, match=next(iter(kwargs))):
        Limits(**kwargs)


def _tiny() -> Graph:
    """x (2, 3) f32 = 24 bytes, w (3, 4) = 48 bytes, x @ w (2, 4) = 32 bytes."""
    g = Graph("tiny", dtype="float32")
    matmul(g.input("x", (2, 3)), g.param("w", (3, 4)))
    return g


def test_eval_bytes_count_inputs_and_results_per_sample_and_parameters_once():
    assert estimate_eval_bytes(_tiny()) == 24 + 48 + 32
    assert estimate_eval_bytes(_tiny(), samples=3) == 3 * 24 + 48 + 3 * 32


def test_eval_size_is_refused_above_the_limit_naming_estimate_and_flag():
    limits = Limits(max_tensor_bytes=103)
    with pytest.raises(GraphError) as e:
        check_eval_size(_tiny(), limits=limits, what="checking")
    message = str(e.value)
    assert "checking tiny" in message and "104 bytes" in message and "103 bytes" in message
    assert "--max-bytes" in message
    assert check_eval_size(_tiny(), limits=Limits(max_tensor_bytes=104)) == 104


@pytest.mark.parametrize("samples", [0, 2.5, True])
def test_eval_samples_must_be_a_positive_integer(samples):
    with pytest.raises(GraphError, match="samples"):
        estimate_eval_bytes(_tiny(), samples)


def test_limits_must_be_a_limits_record():
    with pytest.raises(AccelsimError, match="Limits"):
        check_step_size(_tiny(), 1, 1, 1, limits=10)
    with pytest.raises(AccelsimError, match="Limits"):
        check_eval_size(_tiny(), limits={"max_tensor_bytes": 10})


def test_finite_differences_are_sized_in_flops_before_they_run():
    """2 evaluations per coordinate: the mlp at batch 100000 with 8 coordinates per tensor is ~1.3e12
    FLOPs; a tighter budget refuses it at once, naming the estimate and the flag that raises it."""
    from accelsim.limits import Limits, check_fd_work, graph_flops

    graph = A.models.build("mlp", batch=100_000, dtype="float64")
    flops = check_fd_work(graph, 8)
    tensors = sum(1 for n in graph.nodes if (n.op == "input" and n.dtype != "int64") or n.trainable)
    assert flops == 2 * 8 * tensors * graph_flops(graph)
    with pytest.raises(A.AccelsimError, match=r"--max-flops"):
        check_fd_work(graph, 8, Limits(max_flops=flops - 1))


def test_grad_cli_refuses_finite_differences_over_the_flop_budget(capsys):
    from accelsim.cli import main

    assert main(["grad", "--model", "mlp", "--batch", "1000", "--max-flops", "1000", "--no-torch"]) == 1
    err = capsys.readouterr().err
    assert "FLOPs" in err and "--max-flops" in err and "Traceback" not in err
