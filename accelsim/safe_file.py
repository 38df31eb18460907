"""Reading a file a user named (path -> bytes or sha256), the one way every loader reads one: it must be a
regular file (symlinks followed), it is opened without blocking and read with a byte cap, so /dev/zero, a
FIFO, a socket or a file that grows while it is read can neither hang a command nor fill its memory.

Each loader words its refusals through a `FileRules` (what it expected, its error class, its size limit and
how that limit is raised); the checks themselves live here once. A JSON file's text is then decoded and parsed
here too (UTF-8, no NaN or Infinity, syntax errors with line and column), worded through a `JsonRules`.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from accelsim.errors import AccelsimError

BLOCK_BYTES = 2**20
"""Hashing reads in blocks of this size, so a large model file is never held twice."""
SPECIAL_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
                 (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
"""O_NONBLOCK: opening a FIFO that has no writer returns at once instead of waiting for one (the kind
check after opening then refuses it)."""


@dataclass(frozen=True)
class FileRules:
    """How one kind of file is read and how its refusals read.

    expected: what the file should be, named in every refusal ("a sweep spec file (YAML)").
    limit_bytes: the most bytes read; a larger file is refused before it is read.
    error: the AccelsimError subclass raised.
    too_large: the problem for a file of n bytes above the limit (n may be a lower bound when the file grew
        while it was read); it should name the limit and how to raise it.
    missing: the problem for a path that does not exist (default: "no such file; expected ...").
    """

    expected: str
    limit_bytes: int
    error: type[AccelsimError]
    too_large: Callable[[int], str]
    missing: str | None = None

    def refuse(self, label: str, problem: str) -> AccelsimError:
        return self.error(f"{label}: {problem}")


def _kind(mode: int) -> str | None:
    """What a non-regular file is ("a directory", "a named pipe (FIFO)", ...); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    return next((name for test, name in SPECIAL_KINDS if test(mode)), "not a regular file")


def special_target(path: str | Path) -> str | None:
    """What stands at an output path that must not be written ("a named pipe (FIFO)", "a directory", ...), or
    None when the path is free or a regular file. Why: opening a FIFO for writing waits for a reader, so
    writing a result there would hang the command; a device would take the bytes and lose them."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None  # nothing there yet (or unreachable: the write itself will say why)
    return _kind(mode)


def _refuse_kind(path: Path, label: str, mode: int, rules: FileRules) -> AccelsimError:
    kind = _kind(mode)
    if kind == "a directory":
        return rules.refuse(label, f"is a directory; expected {rules.expected}")
    real = os.path.realpath(path)
    via = f" (the path is a link to {real})" if real != os.path.abspath(path) else ""
    return rules.refuse(label, f"not a regular file but {kind}{via}; expected {rules.expected}")


def _os_problem(path: Path, label: str, e: OSError | ValueError, rules: FileRules) -> AccelsimError:
    if isinstance(e, (FileNotFoundError, NotADirectoryError, ValueError)):  # ValueError: a NUL byte in the path
        return rules.refuse(label, rules.missing or f"no such file; expected {rules.expected}")
    return rules.refuse(label, f"cannot be read ({getattr(e, 'strerror', None) or e}); expected {rules.expected}")


@contextmanager
def open_regular(path: str | Path, rules: FileRules, label: str | None = None) -> Iterator[tuple[BinaryIO, int]]:
    """The open file and its size in bytes, once it is known to be a regular file within rules.limit_bytes."""
    path = Path(path)
    label = str(path) if label is None else label
    try:
        mode = os.stat(path).st_mode  # follows symlinks: a link to /dev/zero is a character device
        if not stat.S_ISREG(mode):
            raise _refuse_kind(path, label, mode, rules)
        fd = os.open(path, _OPEN_FLAGS)
    except (OSError, ValueError) as e:
        raise _os_problem(path, label, e, rules) from None
    try:
        info = os.fstat(fd)  # the file opened may not be the one checked: a path can be swapped in between
        if not stat.S_ISREG(info.st_mode):
            raise _refuse_kind(path, label, info.st_mode, rules)
        if info.st_size > rules.limit_bytes:
            raise rules.refuse(label, rules.too_large(info.st_size))
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        yield f, info.st_size


def read_regular(path: str | Path, rules: FileRules, label: str | None = None) -> bytes:
    """The bytes of regular file `path`, at most rules.limit_bytes of them; else one rules.error paragraph."""
    label = str(path) if label is None else label
    with open_regular(path, rules, label) as (f, size):
        try:  # at most one byte past the measured size: read(n) allocates n bytes before it reads any
            data = f.read(min(rules.limit_bytes, size) + 1)
        except OSError as e:
            raise _os_problem(Path(path), label, e, rules) from None
    if len(data) > size:  # it grew after it was measured: what it holds now is not what was checked
        raise rules.refuse(label, f"it grew while it was read (measured {size:,} bytes)")
    return data


def sha256_regular(path: str | Path, rules: FileRules, label: str | None = None) -> str:
    """sha256 of regular file `path`, read in blocks and never past rules.limit_bytes."""
    label = str(path) if label is None else label
    h = hashlib.sha256()
    total = 0
    with open_regular(path, rules, label) as (f, _):
        try:
            for block in iter(lambda: f.read(BLOCK_BYTES), b""):
                total += len(block)
                if total > rules.limit_bytes:
                    raise rules.refuse(label, rules.too_large(total))
                h.update(block)
        except OSError as e:
            raise _os_problem(Path(path), label, e, rules) from None
    return h.hexdigest()


@dataclass(frozen=True)
class JsonRules:
    """How one kind of JSON file is parsed and how its refusals read.

    error: the AccelsimError subclass raised.
    kind: what the file should be, as in "not {kind}" ("a schedule", "a graph file").
    constant: the problem for a NaN, Infinity or -Infinity constant (given its spelling); such a value is
        refused because no file accelsim writes holds one, and it would flow on as a silently wrong number.
    too_deep: the problem for nesting deeper than Python's recursion limit; None: "not {kind}: " and the
        interpreter's words.
    unique_keys: refuse an object that names one key twice (json.loads would keep the last silently).
    """

    error: type[AccelsimError]
    kind: str
    constant: Callable[[str], str]
    too_deep: str | None = None
    unique_keys: bool = False


def decode_utf8(data: bytes, label: str, rules: JsonRules) -> str:
    """The text of a file's bytes; bytes that are not UTF-8 are refused as "not {kind}"."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise rules.error(f"{label}: not a UTF-8 text file, so not {rules.kind}") from None


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    counts = Counter(key for key, _ in pairs)
    dup = next((key for key, _ in pairs if counts[key] > 1), None)  # the first key, in file order, named twice
    if dup is not None:
        raise ValueError(f"key {dup!r} appears twice in one object")
    return dict(pairs)


def parse_json(text: str, label: str, rules: JsonRules) -> object:
    """The JSON value of `text`, or one rules.error naming `label` and, for a syntax error, its line and
    column."""
    def refuse_constant(name: str) -> None:
        raise ValueError(rules.constant(name))

    try:
        return json.loads(text, parse_constant=refuse_constant,
                          object_pairs_hook=_unique_keys if rules.unique_keys else None)
    except json.JSONDecodeError as e:
        raise rules.error(f"{label}: not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    except ValueError as e:
        raise rules.error(f"{label}: not {rules.kind}: {e}") from None
    except RecursionError as e:
        problem = rules.too_deep if rules.too_deep is not None else f"not {rules.kind}: {e}"
        raise rules.error(f"{label}: {problem}") from None
