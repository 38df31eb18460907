"""The error the ONNX importer raises, and the one-paragraph form of its messages."""
from __future__ import annotations

import re

from accelsim.errors import FrontendError

OnnxImportError = FrontendError
"""Every problem importing an ONNX model; the frontends share FrontendError (an AccelsimError)."""

INSTALL_HINT = "install the ONNX extra: pip install 'accelsim[onnx]' (or pip install onnx)"


def one_line(text: object, limit: int = 400) -> str:
    """`text` (often a multi-line message from onnx or protobuf) as one line of at most `limit` chars,
    so every error the importer raises stays one paragraph."""
    flat = re.sub(r"\s+", " ", str(text)).strip()
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def fail(where: str, problem: str) -> OnnxImportError:
    """The error for `problem` found at `where` (the file, and a node, input or initializer)."""
    return OnnxImportError(one_line(f"{where}: {problem}", limit=20_000))
