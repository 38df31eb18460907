"""Shared helpers of the hostile-input suite: run the CLI in-process or in a memory-capped subprocess, and
assert that a refusal is the project's own error, names its input and the rule, and comes after little work
(Python steps counted by tests/work_meter.py, never wall-clock time, which a busy machine stretches).

Helpers are fixtures (`hostile`, `bombs`) so the test modules need no imports from this directory.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pytest

import accelsim as A
from accelsim.cli import main
from work_meter import Work, WorkMeter

REPO = Path(__file__).resolve().parents[2]
MAX_MESSAGE_CHARS = 20_000  # a refusal is a paragraph, not a dump of the hostile input
SUBPROCESS_MEMORY_BYTES = 6 << 30
# A hang guard for one child, which runs its share of the bombs (each refused after little work, or stopped
# by its step budget) after starting Python and importing accelsim: about 15 s on an idle core. Twenty times
# that, so that a busy machine never reaches it; a hang in C (invisible to the step count) does.
SUBPROCESS_TIMEOUT_S = 300
# Memory-capped children at a time: 12 GiB at worst on a shared machine; one per xdist worker under -n 2,
# where each worker runs the bomb fixture for the bomb tests it was given.
SUBPROCESS_WORKERS = 1 if os.environ.get("PYTEST_XDIST_WORKER") else 2


@dataclass
class CliRun:
    code: int
    out: str
    err: str
    work: Work | None  # None where no step budget was given: nothing was counted

    @property
    def text(self) -> str:
        return self.out + self.err


@contextmanager
def _metered(max_steps: int | None) -> Iterator[Work | None]:
    """A WorkMeter around the block where a step budget is given, else nothing. Why: the meter traces every
    line (sys.settrace) and every allocation (tracemalloc), which makes a compile or a plot several times
    slower, and without a budget it asserts nothing."""
    if max_steps is None:
        yield None
        return
    with WorkMeter(max_steps) as work:
        yield work


def missing_words(text: str, groups: Sequence[str | tuple[str, ...]]) -> list[str]:
    """The groups none of whose alternatives occur in `text` (case-insensitive)."""
    low = text.lower()
    missing = []
    for group in groups:
        alternatives = (group,) if isinstance(group, str) else tuple(group)
        if not any(str(a).lower() in low for a in alternatives):
            missing.append(" or ".join(repr(a) for a in alternatives))
    return missing


def assert_names(text: str, *groups: str | tuple[str, ...]) -> None:
    """Every group (a word, or a tuple of alternative words) occurs in the message."""
    missing = missing_words(text, groups)
    assert not missing, f"the message does not mention {', '.join(missing)}:\n{text[:2000]}"
    assert len(text) <= MAX_MESSAGE_CHARS, f"a {len(text)}-character message: {text[:500]}..."


class Hostile:
    """Runs one hostile input through a surface and checks how it ended."""

    def __init__(self, capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
        self.capsys = capsys
        self.tmp = tmp_path
        self.repo = REPO

    # -- CLI, in-process ---------------------------------------------------------------------------------
    def cli(self, argv: Sequence[str], max_steps: int | None = None) -> CliRun:
        """`main(argv)` with stdout/stderr captured; an exception other than SystemExit fails the test, and
        so does running more than `max_steps` Python steps."""
        self.capsys.readouterr()
        with _metered(max_steps) as work:
            try:
                code = main([str(a) for a in argv])
            except SystemExit as e:  # argparse refusals
                code = e.code if isinstance(e.code, int) else 1
        captured = self.capsys.readouterr()
        run = CliRun(code, captured.out, captured.err, work)
        assert "Traceback" not in run.text, f"a traceback in the output of {list(argv)}:\n{run.text[-3000:]}"
        return run

    def cli_refuses(self, argv: Sequence[str], *words: str | tuple[str, ...], codes: tuple[int, ...] = (1, 2),
                    max_steps: int | None = None) -> CliRun:
        run = self.cli(argv, max_steps)
        assert run.code in codes, (f"{list(argv)} was not refused (exit {run.code}, expected {codes}); "
                                   f"output:\n{run.text[-2000:]}")
        assert_names(run.err, *words)
        return run

    def cli_ok(self, argv: Sequence[str]) -> CliRun:
        run = self.cli(argv)
        assert run.code == 0, f"{list(argv)} exited {run.code}:\n{run.text[-3000:]}"
        return run

    @staticmethod
    def names(text: str, *words: str | tuple[str, ...]) -> None:
        """The message mentions every word (or one of each tuple of alternatives) and is not a dump."""
        assert_names(text, *words)

    # -- Python API --------------------------------------------------------------------------------------
    @staticmethod
    def refuses(fn: Callable[[], Any], *words: str | tuple[str, ...], max_steps: int | None = None) -> str:
        """`fn()` raises AccelsimError naming `words` within `max_steps` Python steps; any other exception
        propagates and fails the test."""
        try:
            with _metered(max_steps):
                value = fn()
        except A.AccelsimError as e:
            message = str(e)
            assert_names(message, *words)
            return message
        raise AssertionError(f"accepted silently (returned {type(value).__name__}); expected an AccelsimError "
                             f"mentioning {words}")

    @staticmethod
    def ok_or_refuses(fn: Callable[[], Any], *words: str | tuple[str, ...]) -> Any:
        """Either `fn()` works (returns its value) or raises AccelsimError naming `words`; never anything else.
        Returns None when it was refused."""
        try:
            return fn()
        except A.AccelsimError as e:
            assert_names(str(e), *words)
            return None

    # -- files -------------------------------------------------------------------------------------------
    def write(self, name: str, content: str | bytes) -> Path:
        path = self.tmp / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return path

    def write_json(self, name: str, data: Any) -> Path:
        return self.write(name, json.dumps(data))


@pytest.fixture
def hostile(capsys: pytest.CaptureFixture, tmp_path: Path) -> Hostile:
    return Hostile(capsys, tmp_path)


@pytest.fixture(autouse=True)
def _run_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands that write default outputs (plots/..., schedules/...) write them under tmp_path, never into
    the repository; inputs are always given as absolute paths or bundled names."""
    monkeypatch.chdir(tmp_path)


# -- memory-capped subprocesses (size bombs) ---------------------------------------------------------------
@dataclass
class BombRun:
    code: int | None  # main()'s exit status; None: the child died or was killed while running this bomb
    out: str
    err: str
    work: Work | None  # inside main() (or the API call), as the child counted it
    note: str = ""  # why there is no exit status


# The child runs its bombs one after another with `python -m accelsim`'s entry point (accelsim.cli.main), so
# the interpreter is started (and accelsim imported, seconds on a loaded machine) once per child, not once
# per bomb. Markers on both streams split the output per bomb. Each bomb runs under a WorkMeter with the
# step budget given as argv[2]: a blow-up is stopped there (an AssertionError, printed as a traceback)
# instead of running into the memory cap or the timeout. An API bomb is a Python snippet; it may call
# `meter.reset()` to count only the call under test.
_CHILD = r"""
import json, sys, traceback
import accelsim as A
from accelsim.cli import main, make_parser
from work_meter import WorkMeter
make_parser()  # every subcommand's module, and every public name: imported once, outside the meters (as
for name in A.__all__:  # an eager `import accelsim` did), so a bomb's steps count its own work only
    getattr(A, name)
for key, api, payload in json.loads(sys.argv[1]):
    for stream in (sys.stdout, sys.stderr):
        print(f"@@begin {key}", file=stream, flush=True)
    meter = WorkMeter(int(sys.argv[2]))
    ns = {"sys": sys, "meter": meter, "__name__": "__bomb__"}
    try:
        with meter:
            if api:
                code = 0
                exec(payload[0], ns)
            else:
                code = main(payload)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        print(f"@@end {key} {code} {meter.work.steps} {meter.work.peak_bytes}", file=stream, flush=True)
"""


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (SUBPROCESS_MEMORY_BYTES, SUBPROCESS_MEMORY_BYTES))


def _split(text: str) -> tuple[dict[str, str], dict[str, tuple[int, Work]], str | None]:
    """Per-bomb output, finished bombs' (code, work), and the bomb that began but never ended."""
    chunks: dict[str, list[str]] = {}
    ended: dict[str, tuple[int, Work]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("@@begin "):
            current = line.split(" ", 1)[1]
            chunks[current] = []
        elif line.startswith("@@end "):
            _, key, code, steps, peak_bytes = line.split(" ")
            ended[key] = (int(code), Work(int(steps), int(peak_bytes)))
            current = None
        elif current is not None:
            chunks[current].append(line)
    return {k: "\n".join(v) for k, v in chunks.items()}, ended, current


def run_capped(jobs: list[tuple[str, bool, list[str]]], cwd: Path, max_steps: int) -> dict[str, BombRun]:
    """Run (key, api, argv-or-[snippet]) bombs in children under a 6 GiB address-space cap, each bomb
    stopped past `max_steps` Python steps and each child by the SUBPROCESS_TIMEOUT_S hang guard; a child
    that dies mid-bomb is replaced by a fresh one for the bombs left."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    results: dict[str, BombRun] = {}
    todo = list(jobs)
    while todo:
        cmd = [sys.executable, "-c", _CHILD, json.dumps(todo), str(max_steps)]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S, cwd=cwd, env=env,
                               preexec_fn=_cap_memory)
            out, err, why = p.stdout, p.stderr, f"the child exited with status {p.returncode} during this bomb"
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            why = f"still running after {SUBPROCESS_TIMEOUT_S} s: killed"
        outs, ended, _ = _split(out)
        errs, _, dying = _split(err)
        for key, _, _ in todo:
            if key in ended:
                code, work = ended[key]
                results[key] = BombRun(code, outs.get(key, ""), errs.get(key, ""), work)
        if dying is None and not any(k not in ended for k, _, _ in todo):
            break
        dead = dying or next(k for k, _, _ in todo if k not in ended)
        results[dead] = BombRun(None, outs.get(dead, ""), errs.get(dead, "") or err[-3000:], None, why)
        todo = [job for job in todo if job[0] not in results]
    return results


def run_all_capped(jobs: dict[str, tuple[Sequence[str], bool]], cwd: Path, max_steps: int) -> dict[str, BombRun]:
    """All bombs, split over SUBPROCESS_WORKERS children running at once."""
    items = [(key, api, [str(a) for a in argv]) for key, (argv, api) in jobs.items()]
    shares = [items[i::SUBPROCESS_WORKERS] for i in range(SUBPROCESS_WORKERS)]
    with ThreadPoolExecutor(SUBPROCESS_WORKERS) as pool:
        parts = list(pool.map(lambda share: run_capped(share, cwd, max_steps), [s for s in shares if s]))
    return {k: v for part in parts for k, v in part.items()}


@pytest.fixture(scope="session")
def capped() -> Callable[[dict[str, tuple[Sequence[str], bool]], Path, int], dict[str, BombRun]]:
    """run_all_capped: ({key: (argv or [python snippet], api)}, cwd, max_steps) -> {key: BombRun}."""
    return run_all_capped
