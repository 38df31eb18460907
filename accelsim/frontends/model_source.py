"""A model file as a graph's source: its absolute path and the sha256 of its bytes (path -> ModelSource), so a
schedule compiled from the file can check that the file still holds what it was compiled from."""
from __future__ import annotations

from pathlib import Path

from accelsim.errors import FrontendError
from accelsim.graph.provenance import ModelSource, file_source as _file_source
from accelsim.limits import DEFAULT_READ_LIMITS, ReadLimits, bytes_str
from accelsim.safe_file import FileRules, sha256_regular


def file_source(path: Path, sha256: str, loss: str | None = None) -> ModelSource:
    """The graph source naming model file `path` (made absolute) and the sha256 of its bytes."""
    return _file_source(str(Path(path).resolve()), sha256, loss)


def model_file_rules(limits: ReadLimits = DEFAULT_READ_LIMITS, expected: str = "a model file") -> FileRules:
    """How a model file is read: a regular file of at most limits.max_file_bytes."""
    def too_large(n: int) -> str:
        return (f"is {n:,} bytes, above the limit of {bytes_str(limits.max_file_bytes)} on the bytes read for one "
                f"model; {ReadLimits.how_to_raise('max_file_bytes')}")

    return FileRules(expected, limits.max_file_bytes, FrontendError, too_large)


def file_sha256(path: str | Path, limits: ReadLimits = DEFAULT_READ_LIMITS) -> str:
    """sha256 of a model file's bytes, read in blocks; FrontendError when it is not a regular file within the
    limit or cannot be read."""
    return sha256_regular(path, model_file_rules(limits))
