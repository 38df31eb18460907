"""Shared helpers of the hostile-input suite: run the CLI in-process or in a memory-capped subprocess, and
assert that a refusal is the project's own error, names its input and the rule, and comes quickly.

Helpers are fixtures (`hostile`, `bombs`) so the test modules need no imports from this directory.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import pytest

import accelsim as A
from accelsim.cli import main

REPO = Path(__file__).resolve().parents[2]
MAX_MESSAGE_CHARS = 20_000  # a refusal is a paragraph, not a dump of the hostile input
SUBPROCESS_MEMORY_BYTES = 6 << 30
SUBPROCESS_TIMEOUT_S = 60
# Memory-capped children at a time: 12 GiB at worst on a shared machine; one per xdist worker under -n 2,
# where each worker runs the bomb fixture for the bomb tests it was given.
SUBPROCESS_WORKERS = 1 if os.environ.get("PYTEST_XDIST_WORKER") else 2


@dataclass
class CliRun:
    code: int
    out: str
    err: str
    seconds: float

    @property
    def text(self) -> str:
        return self.out + self.err


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
    def cli(self, argv: Sequence[str]) -> CliRun:
        """`main(argv)` with stdout/stderr captured; an exception other than SystemExit fails the test."""
        self.capsys.readouterr()
        start = time.perf_counter()
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:  # argparse refusals
            code = e.code if isinstance(e.code, int) else 1
        seconds = time.perf_counter() - start
        captured = self.capsys.readouterr()
        run = CliRun(code, captured.out, captured.err, seconds)
        assert "Traceback" not in run.text, f"a traceback in the output of {list(argv)}:\n{run.text[-3000:]}"
        return run

    def cli_refuses(self, argv: Sequence[str], *words: str | tuple[str, ...], codes: tuple[int, ...] = (1, 2),
                    max_seconds: float | None = None) -> CliRun:
        run = self.cli(argv)
        assert run.code in codes, (f"{list(argv)} was not refused (exit {run.code}, expected {codes}); "
                                   f"output:\n{run.text[-2000:]}")
        assert_names(run.err, *words)
        if max_seconds is not None:
            assert run.seconds < max_seconds, f"refusing {list(argv)} took {run.seconds:.2f} s"
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
    def refuses(fn: Callable[[], Any], *words: str | tuple[str, ...], max_seconds: float | None = None) -> str:
        """`fn()` raises AccelsimError naming `words`; any other exception propagates and fails the test."""
        start = time.perf_counter()
        try:
            value = fn()
        except A.AccelsimError as e:
            seconds = time.perf_counter() - start
            message = str(e)
            assert_names(message, *words)
            if max_seconds is not None:
                assert seconds < max_seconds, f"the refusal took {seconds:.2f} s"
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
    refuse_seconds: float | None  # time inside main() (or the API call), as the child measured it
    note: str = ""  # why there is no exit status


# The child runs its bombs one after another with `python -m accelsim`'s entry point (accelsim.cli.main), so
# the interpreter is started (and accelsim imported, seconds on a loaded machine) once per child, not once
# per bomb. Markers on both streams split the output per bomb. An API bomb is a Python snippet; it may set
# `start` itself to time only the call under test.
_CHILD = r"""
import json, sys, time, traceback
from accelsim.cli import main
for key, api, payload in json.loads(sys.argv[1]):
    for stream in (sys.stdout, sys.stderr):
        print(f"@@begin {key}", file=stream, flush=True)
    ns = {"sys": sys, "time": time, "__name__": "__bomb__", "start": time.perf_counter()}
    try:
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
    seconds = time.perf_counter() - ns["start"]
    for stream in (sys.stdout, sys.stderr):
        print(f"@@end {key} {code} {seconds:.3f}", file=stream, flush=True)
"""


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (SUBPROCESS_MEMORY_BYTES, SUBPROCESS_MEMORY_BYTES))


def _split(text: str) -> tuple[dict[str, str], dict[str, tuple[int, float]], str | None]:
    """Per-bomb output, finished bombs' (code, seconds), and the bomb that began but never ended."""
    chunks: dict[str, list[str]] = {}
    ended: dict[str, tuple[int, float]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("@@begin "):
            current = line.split(" ", 1)[1]
            chunks[current] = []
        elif line.startswith("@@end "):
            _, key, code, seconds = line.split(" ")
            ended[key] = (int(code), float(seconds))
            current = None
        elif current is not None:
            chunks[current].append(line)
    return {k: "\n".join(v) for k, v in chunks.items()}, ended, current


def run_capped(jobs: list[tuple[str, bool, list[str]]], cwd: Path) -> dict[str, BombRun]:
    """Run (key, api, argv-or-[snippet]) bombs in children under a 6 GiB address-space cap, each child
    bounded by a 60 s timeout; a child that dies mid-bomb is replaced by a fresh one for the bombs left."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    results: dict[str, BombRun] = {}
    todo = list(jobs)
    while todo:
        cmd = [sys.executable, "-c", _CHILD, json.dumps(todo)]
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
                code, seconds = ended[key]
                results[key] = BombRun(code, outs.get(key, ""), errs.get(key, ""), seconds)
        if dying is None and not any(k not in ended for k, _, _ in todo):
            break
        dead = dying or next(k for k, _, _ in todo if k not in ended)
        results[dead] = BombRun(None, outs.get(dead, ""), errs.get(dead, "") or err[-3000:], None, why)
        todo = [job for job in todo if job[0] not in results]
    return results


def run_all_capped(jobs: dict[str, tuple[Sequence[str], bool]], cwd: Path) -> dict[str, BombRun]:
    """All bombs, split over SUBPROCESS_WORKERS children running at once."""
    items = [(key, api, [str(a) for a in argv]) for key, (argv, api) in jobs.items()]
    shares = [items[i::SUBPROCESS_WORKERS] for i in range(SUBPROCESS_WORKERS)]
    with ThreadPoolExecutor(SUBPROCESS_WORKERS) as pool:
        parts = list(pool.map(lambda share: run_capped(share, cwd), [s for s in shares if s]))
    return {k: v for part in parts for k, v in part.items()}


@pytest.fixture(scope="session")
def capped() -> Callable[[dict[str, tuple[Sequence[str], bool]], Path], dict[str, BombRun]]:
    """run_all_capped: {key: (argv or [python snippet], api)} -> {key: BombRun}."""
    return run_all_capped
