"""Size bombs: work whose size is known before anything is built must be refused after little work (a
budget of Python steps and of memory, counted by tests/work_meter.py), with the estimate or the limit in
the message, never by running out of memory.

The bombs run in child processes (`accelsim.cli.main`, as `python -m accelsim` runs it) under a 6 GiB
address-space cap and a hang guard, two children at once, each running its share of the bombs in turn (a
child that dies is replaced for the bombs left); one module fixture runs them all and each test checks one
bomb. The child counts inside `main()` itself, so the interpreter's start is not counted. Because the
fixture runs every bomb, the test that sets it up carries the longer pytest timeout.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import accelsim as A

REPO = Path(__file__).resolve().parents[2]
MLP = ["--model", "mlp", "--set", "batch=2", "--set", "sizes=16,8,4"]
# Python steps and peak memory a refusal may take: every bomb here is refused within 140k steps and 2 MiB;
# building what one asks for (a million micro-batches' tasks, 10^9 YAML values, a 10^9-sample batch) takes
# orders of magnitude more of both.
REFUSE_STEPS = 1_000_000
REFUSE_PEAK_BYTES = 64 * 2**20
LIMIT = ("limit", "estimate")

pytestmark = pytest.mark.timeout(300)  # a hang guard, not a speed limit: see tests/conftest.py


def _hw_with(tmp: Path, name: str, edit) -> Path:
    d = yaml.safe_load((REPO / "hwconfigs" / "groq_like.yaml").read_text())
    edit(d)
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return path


def _alias_bomb(tmp: Path) -> Path:
    """Billion laughs inside a unit's `when:` (a few hundred bytes, 10^9 leaves once expanded)."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 9):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]")
    bomb = "{" + ", ".join(lines) + "}"
    text = (REPO / "hwconfigs" / "groq_like.yaml").read_text()
    text = text.replace("        categories: [tensor]", f"        categories: [tensor]\n        when: {bomb}", 1)
    path = tmp / "alias_bomb.yaml"
    path.write_text(text)
    return path


def _schedule_with_huge_source(tmp: Path) -> Path:
    """A tiny schedule whose recorded source asks `simulate --dynamic` to rebuild mlp with batch 10^9."""
    fwd = A.models.build("mlp", batch=2, sizes=(16, 8, 4))
    sched = A.compile(A.training_graph(fwd), A.load_hw("groq_like"))
    path = tmp / "huge_source.json"
    A.save_schedule(sched, path)
    data = json.loads(path.read_text())
    data["source"]["options"]["batch"] = 10**9
    path.write_text(json.dumps(data))
    return path


# key -> (argv, or a one-element Python snippet; api?; words the refusal must mention)
def _jobs(tmp: Path) -> dict[str, tuple[list[str], bool, tuple]]:
    unit_count = _hw_with(tmp, "unit_count_10e7", lambda d: d["chips"][0]["units"][0].update(count=10**7))
    chip_count = _hw_with(tmp, "chip_count_10e7", lambda d: d["chips"][0].update(count=10**7))
    api = ("import accelsim as A\n"
           "g = A.training_graph(A.models.build('mlp', batch=2, sizes=(16, 8, 4)))\n"
           "meter.reset()  # the wrapper counts from here: the compile call alone\n"
           "try:\n"
           "    A.compile(g, 'groq_like', microbatches={mb}, data_parallel={dp})\n"
           "except A.AccelsimError as e:\n"
           "    print(e, file=sys.stderr); sys.exit(1)\n")
    return {
        "run_microbatches_1e6": (["run", "--hw", "groq_like", *MLP, "--no-sim", "--microbatches", "1000000"], False,
                                 (LIMIT, "microbatches")),
        "run_data_parallel_1e6": (["run", "--hw", "groq_like", *MLP, "--no-sim", "--data-parallel", "1000000"],
                                  False, (LIMIT, ("data_parallel", "data-parallel"))),
        "check_microbatches_1e6": (["check", "--hw", "groq_like", *MLP, "--microbatches", "1000000"], False,
                                   (LIMIT,)),
        "grad_batch_1e9": (["grad", "--model", "mlp", "--set", "sizes=16,8,4", "--no-torch", "--batch",
                            "1000000000"], False, (LIMIT,)),
        "grad_sizes_1e5_squared": (["grad", "--model", "mlp", "--set", "batch=1", "--set", "sizes=100000,100000,4",
                                    "--no-torch"], False, (LIMIT,)),
        "run_unit_count_1e7": (["run", "--hw", str(unit_count), *MLP, "--no-sim"], False, (LIMIT + ("count",),)),
        "run_chip_count_1e7": (["run", "--hw", str(chip_count), *MLP, "--no-sim"], False, (LIMIT + ("count",),)),
        "hw_validate_alias_bomb": (["hw", "validate", str(_alias_bomb(tmp))], False,
                                   ("alias_bomb.yaml", LIMIT + ("alias",))),
        "simulate_dynamic_huge_source": (["simulate", str(_schedule_with_huge_source(tmp)), "--dynamic", "--out",
                                          str(tmp / "plots")], False, ("huge_source.json",)),
        "api_compile_microbatches_1e6": ([api.format(mb=10**6, dp=1)], True, (LIMIT, "microbatches")),
        "api_compile_data_parallel_1e6": ([api.format(mb=1, dp=10**6)], True, (LIMIT, "data_parallel")),
    }


@pytest.fixture(scope="module")
def bomb_runs(tmp_path_factory, capped):
    tmp = tmp_path_factory.mktemp("bombs")
    jobs = _jobs(tmp)
    runs = capped({k: (argv, api) for k, (argv, api, _) in jobs.items()}, tmp, REFUSE_STEPS)
    return {k: (runs[k], jobs[k][2]) for k in jobs}


BOMBS = ["run_microbatches_1e6", "run_data_parallel_1e6", "check_microbatches_1e6", "grad_batch_1e9",
         "grad_sizes_1e5_squared", "run_unit_count_1e7", "run_chip_count_1e7", "hw_validate_alias_bomb",
         "simulate_dynamic_huge_source", "api_compile_microbatches_1e6", "api_compile_data_parallel_1e6"]


@pytest.mark.timeout(900)  # the hang guard of the fixture's children (SUBPROCESS_TIMEOUT_S), twice, and more
@pytest.mark.parametrize("key", BOMBS)
def test_size_bomb_is_refused_after_little_work_without_memory_growth(key, bomb_runs, hostile):
    run, words = bomb_runs[key]
    text = run.out + run.err
    assert run.code is not None, f"{key}: {run.note}; output:\n{text[-2000:]}"
    assert "Traceback" not in text and "MemoryError" not in text, f"{key}: traceback:\n{text[-3000:]}"
    assert run.code == 1, f"{key}: exit {run.code} (expected 1: refused); output:\n{text[-2000:]}"
    hostile.names(run.err, *words)
    assert run.work.steps <= REFUSE_STEPS and run.work.peak_bytes < REFUSE_PEAK_BYTES, f"{key}: {run.work.line()}"


def test_bomb_list_matches_the_jobs(tmp_path):
    assert sorted(BOMBS) == sorted(_jobs(tmp_path))


# -- the limits can be raised and lowered from the command line (cheap, in-process) -------------------------
def test_lowered_task_limit_refuses_a_small_step_with_its_estimate(hostile):
    hostile.cli_refuses(["run", "--hw", "groq_like", *MLP, "--no-sim", "--microbatches", "4", "--max-tasks", "5"],
                        "limit", codes=(1,), max_steps=REFUSE_STEPS)


def test_lowered_byte_limit_refuses_grad_with_its_estimate(hostile):
    hostile.cli_refuses(["grad", *MLP, "--no-torch", "--max-bytes", "100"], "limit", codes=(1,),
                        max_steps=REFUSE_STEPS)


@pytest.mark.parametrize("value", ["0", "-5", "lots"])
def test_limit_flags_refuse_nonsense(value, hostile):
    hostile.cli_refuses(["run", "--hw", "groq_like", *MLP, "--no-sim", "--max-tasks", value], "max-tasks",
                        codes=(1, 2))
