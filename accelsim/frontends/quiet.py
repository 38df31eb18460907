"""Keep what torch and onnx say to themselves from the user: warnings, log records and prints raised while a
model is imported are collected instead of shown, so a user who did nothing wrong sees nothing, and one who
did sees accelsim's one-paragraph error, into which the collected first line can be folded.

torch logs through its own handlers (propagate=False on "torch", "torch.export", "torch.fx...", each with a
stderr handler) and prints an FX graph to sys.stderr when export fails; both are redirected for the block and
restored after it. Not thread-safe (warnings and logging are process-wide), like the libraries' own switches.
"""
from __future__ import annotations

import contextlib
import io
import logging
import warnings
from dataclasses import dataclass, field
from typing import Iterator

from accelsim.frontends.onnx_errors import one_line

LIBRARY_LOGGERS = ("torch", "onnx", "onnxscript")
"""Logger name prefixes of the libraries the importers call."""


@dataclass
class Heard:
    """What the libraries said during a quiet block, one line each, in order."""

    lines: list[str] = field(default_factory=list)

    def first(self, limit: int = 200) -> str | None:
        """The first thing said, as one line (for folding into an error), or None."""
        return one_line(self.lines[0], limit) if self.lines else None


class _Collector(logging.Handler):
    def __init__(self, heard: Heard) -> None:
        super().__init__(logging.WARNING)
        self.heard = heard

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # a library's malformed log call must not become the user's error
            text = str(record.msg)
        self.heard.lines.append(text.strip().splitlines()[0] if text.strip() else record.levelname)


def _library_loggers() -> list[logging.Logger]:
    names = [n for n in list(logging.root.manager.loggerDict)
             if any(n == p or n.startswith(p + ".") for p in LIBRARY_LOGGERS)]
    return [logging.getLogger(n) for n in sorted(set(names) | set(LIBRARY_LOGGERS))]


@contextlib.contextmanager
def quiet_libraries() -> Iterator[Heard]:
    """For the block: library warnings recorded, library log records collected (every logger under torch,
    onnx, onnxscript that has handlers gets the collector instead), stdout and stderr captured."""
    heard = Heard()
    collector = _Collector(heard)
    saved = []
    for logger in _library_loggers():
        saved.append((logger, logger.handlers[:], logger.propagate))
        if logger.handlers or logger.name in LIBRARY_LOGGERS:
            logger.handlers[:] = [collector]
            logger.propagate = False
    printed = io.StringIO()
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(printed), \
                contextlib.redirect_stderr(printed):
            warnings.simplefilter("always")
            try:
                yield heard
            finally:
                heard.lines.extend(f"{w.category.__name__}: {w.message}" for w in caught)
                heard.lines.extend(line for line in printed.getvalue().splitlines() if line.strip())
    finally:
        for logger, handlers, propagate in saved:
            logger.handlers[:] = handlers
            logger.propagate = propagate
