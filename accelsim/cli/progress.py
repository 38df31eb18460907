"""Progress on stderr while a command works: one transient spinner line per phase ("compiling  0:00:03"),
shown only when stderr is a terminal, so piped output, log files and tests stay clean. Nothing may be
printed to stdout inside a phase (the spinner owns the terminal's last line while it runs)."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

_active: list[Progress] = []
"""The display of the outermost phase running now: a phase inside it adds a line to it (rich allows one
live display at a time)."""


def stderr_console() -> Console:
    """The console progress is drawn on (tests replace this with a forced terminal)."""
    return Console(stderr=True)


def enabled() -> bool:
    """Whether progress is shown: stderr is a terminal."""
    return stderr_console().is_terminal


@contextmanager
def _line(label: str, total: int | None = None) -> Iterator[tuple[Progress, int] | None]:
    """A spinner line for `label` for the duration of the block; None where progress is not shown."""
    if _active:
        bar = _active[-1]
        task = bar.add_task(label, total=total)
        try:
            yield bar, task
        finally:
            bar.remove_task(task)
        return
    console = stderr_console()
    if not console.is_terminal:
        yield None
        return
    bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                   transient=True, redirect_stdout=False, redirect_stderr=False)
    task = bar.add_task(label, total=total)
    _active.append(bar)
    try:
        with bar:
            yield bar, task
    finally:
        _active.pop()


@contextmanager
def phase(label: str) -> Iterator[None]:
    """Show `label` with a spinner and the elapsed time while the block runs ("building the model")."""
    with _line(label):
        yield


@contextmanager
def counter(label: str, total: int) -> Iterator[Callable[[int, int], None] | None]:
    """A phase that counts: the block gets `update(done, total)` to call as work completes (the line reads
    "label 3/16"), or None where progress is not shown."""
    with _line(f"{label} 0/{total}", total=total) as line:
        if line is None:
            yield None
            return
        bar, task = line

        def update(done: int, total: int) -> None:
            bar.update(task, description=f"{label} {done}/{max(done, total)}", completed=done,
                       total=max(done, total))

        yield update
