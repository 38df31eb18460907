"""numba.njit whose on-disk cache also keys on what a function compiles in from other files.

numba keys a cached function on its own file's timestamp and its own bytecode. A kernel that calls a
jitted function of another file (scalar.py), or freezes another module's constants (the opcodes), keeps
loading the machine code compiled against the old version after that file changes. `stamped_njit` adds
a stamp of those dependencies to the cache key, so changing them recompiles every function built on them.
"""
from __future__ import annotations

import hashlib
from typing import Any, Callable

import numba
from numba.core.caching import FunctionCache


_KEYABLE = callable(getattr(FunctionCache, "_index_key", None))
"""Whether this numba still keys its cache through `_index_key` (an internal): without it, no disk cache."""


class _StampedCache(FunctionCache):
    """numba's per-function cache, with `stamp` in every entry's key (an entry of another stamp is a miss)."""

    def __init__(self, py_func: Callable, stamp: str) -> None:
        super().__init__(py_func)
        self._stamp = stamp

    def _index_key(self, sig: Any, codegen: Any) -> tuple:
        return (*super()._index_key(sig, codegen), self._stamp)


def stamp_of(*parts: bytes | str) -> str:
    """A short hash of `parts` (file contents, reprs of tables): the stamp of what they describe."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little") + data)
    return h.hexdigest()[:32]


def stamped_njit(stamp: str, **options: Any) -> Callable[[Callable], Any]:
    """numba.njit(cache=True, **options), its cache entries keyed on `stamp` too."""
    if "cache" in options:
        raise TypeError("stamped_njit always caches; do not pass cache=")

    def decorate(fn: Callable) -> Any:
        dispatcher = numba.njit(**options)(fn)
        if not _KEYABLE:  # a numba whose cache internals changed: compile per process, never load stale code
            return dispatcher
        dispatcher._cache = _StampedCache(dispatcher.py_func, stamp)  # what njit(cache=True) installs, keyed
        return dispatcher
    return decorate
