"""`load_model(path)`: a model file -> Graph, by suffix (one `ModelFormat` per suffix), with the file recorded
as the graph's source (absolute path + sha256 of its bytes) so a schedule compiled from it can be rechecked.

.json: an accelsim graph file (frontends/graph_file.py); .pt2: a saved torch.export ExportedProgram (needs the
torch extra); .onnx: the ONNX importer (accelsim.frontends.onnx_import, needs onnx), imported only when used.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from accelsim.errors import FrontendError
from accelsim.graph.ir import Graph
from accelsim.graph.provenance import ModelSource, file_source as _file_source

MAX_PT2_BYTES = 2 * 2**30
"""A saved ExportedProgram holds the weights: ResNet-50 in float32 is ~100 MB, GPT-2 small ~0.5 GB."""
DEFAULT_LOSS = "mse"


def file_source(path: Path, sha256: str, loss: str | None = None) -> ModelSource:
    """The graph source naming model file `path` (made absolute) and the sha256 of its bytes."""
    return _file_source(str(Path(path).resolve()), sha256, loss)


def file_sha256(path: str | Path) -> str:
    """sha256 of the file's bytes, read in blocks; FrontendError when it cannot be read."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(2**20), b""):
                h.update(block)
    except FileNotFoundError:
        raise FrontendError(f"{path}: no such file") from None
    except OSError as e:
        raise FrontendError(f"{path}: cannot read it: {e.strerror or e}") from None
    return h.hexdigest()


def _load_json(path: Path, loss: str) -> Graph:
    from accelsim.frontends.graph_file import load_graph

    if loss != DEFAULT_LOSS:
        raise FrontendError(f"{path}: a graph file already ends in its loss; loss={loss!r} applies to .pt2 and .onnx files")
    return load_graph(path)


def _load_pt2(path: Path, loss: str) -> Graph:
    from accelsim.frontends.torch_export import from_exported, require_torch

    torch = require_torch()
    if path.is_file() and path.stat().st_size > MAX_PT2_BYTES:
        raise FrontendError(f"{path}: {path.stat().st_size:,} bytes is above the {MAX_PT2_BYTES:,} a .pt2 file may "
                            "have")
    sha = file_sha256(path)
    try:
        ep = torch.export.load(str(path))
    except Exception as e:  # a corrupt archive raises zipfile, pickle or torch errors
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise FrontendError(f"{path}: not a saved torch.export program (torch.export.load: {first})") from None
    graph = from_exported(ep, name=path.stem, loss=loss)
    graph.source = file_source(path, sha, loss if loss != DEFAULT_LOSS else None)
    return graph


def _load_onnx(path: Path, loss: str) -> Graph:
    from accelsim.frontends.onnx_import import load_onnx

    sha = file_sha256(path)
    graph = load_onnx(path, loss=loss)
    graph.source = file_source(path, sha, loss if loss != DEFAULT_LOSS else None)
    return graph


@dataclass(frozen=True)
class ModelFormat:
    suffix: str
    load: Callable[[Path, str], Graph]
    doc: str


FORMATS: dict[str, ModelFormat] = {f.suffix: f for f in (
    ModelFormat(".json", _load_json, "accelsim graph file (accelsim import, save_graph)"),
    ModelFormat(".pt2", _load_pt2, "saved torch.export ExportedProgram (torch.export.save)"),
    ModelFormat(".onnx", _load_onnx, "ONNX model"),
)}


def load_model(path: str | Path, *, loss: str = DEFAULT_LOSS) -> Graph:
    """The forward Graph in model file `path`, read by its suffix (.json, .pt2, .onnx). `loss` picks the loss
    head of a .pt2 program or an ONNX model (frontends.losses); a graph file keeps its own."""
    if not isinstance(path, (str, Path)) or not str(path):
        raise FrontendError(f"load_model needs a file path (str or pathlib.Path), got {path!r}")
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        known = ", ".join(f"{f.suffix} ({f.doc})" for f in FORMATS.values())
        raise FrontendError(f"{path}: unknown model file suffix {path.suffix!r}; expected one of {known}")
    if not path.exists():
        raise FrontendError(f"{path}: no such model file")
    return fmt.load(path, loss)
