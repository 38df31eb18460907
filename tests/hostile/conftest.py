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
SUBPROCESS_WORKERS = 2  # two memory-capped children at a time: 12 GiB at worst on a shared machine


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
    code: int | None  # None: killed by the timeout
    out: str
    err: str
    seconds: float  # wall time of the whole child, import included
    refuse_seconds: float | None  # time inside main(), as the child measured it


_CHILD = """
import sys, time
from accelsim.cli import main
start = time.perf_counter()
try:
    code = main(sys.argv[1:])
finally:
    print(f"@@main_seconds {time.perf_counter() - start:.3f}", file=sys.stderr)
sys.exit(code)
"""
_CHILD_API = """
import sys, time
start = time.perf_counter()
try:
    exec(sys.argv[1])
finally:
    print(f"@@main_seconds {time.perf_counter() - start:.3f}", file=sys.stderr)
"""


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (SUBPROCESS_MEMORY_BYTES, SUBPROCESS_MEMORY_BYTES))


def run_capped(argv: Sequence[str], cwd: Path, api: bool = False) -> BombRun:
    """`python -m accelsim ARGV` (through a wrapper that times main()) or, with api=True, a Python
    snippet, under a 6 GiB address-space cap and a 60 s timeout."""
    cmd = [sys.executable, "-c", _CHILD_API if api else _CHILD, *map(str, argv)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S, cwd=cwd, env=env,
                           preexec_fn=_cap_memory)
        code, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        code = None
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
    seconds = time.perf_counter() - start
    refuse = None
    for line in err.splitlines():
        if line.startswith("@@main_seconds "):
            refuse = float(line.split()[1])
    err = "\n".join(line for line in err.splitlines() if not line.startswith("@@main_seconds "))
    return BombRun(code, out, err, seconds, refuse)


def run_all_capped(jobs: dict[str, tuple[Sequence[str], bool]], cwd: Path) -> dict[str, BombRun]:
    with ThreadPoolExecutor(SUBPROCESS_WORKERS) as pool:
        futures = {key: pool.submit(run_capped, argv, cwd, api) for key, (argv, api) in jobs.items()}
        return {key: f.result() for key, f in futures.items()}


@pytest.fixture(scope="session")
def capped() -> Callable[[dict[str, tuple[Sequence[str], bool]], Path], dict[str, BombRun]]:
    """run_all_capped: {key: (argv or [python snippet], api)} -> {key: BombRun}, two children at a time."""
    return run_all_capped
