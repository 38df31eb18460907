"""`load_model(path)`: a model file -> Graph, by suffix (one `ModelFormat` per suffix), with the file recorded
as the graph's source (absolute path + sha256 of its bytes) so a schedule compiled from it can be rechecked.

.json: an accelsim graph file (frontends/graph_file.py); .pt2: a saved torch.export ExportedProgram (needs the
torch extra); .onnx: the ONNX importer (accelsim.frontends.onnx_import, needs onnx), imported only when used.
"""
from __future__ import annotations

import hashlib
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from accelsim.errors import FrontendError
from accelsim.frontends.graph_file import load_graph
from accelsim.frontends.model_source import file_sha256, file_source, model_file_rules
from accelsim.graph.ir import Graph
from accelsim.limits import DEFAULT_READ_LIMITS, ReadLimits
from accelsim.safe_file import read_regular, sha256_regular

__all__ = ["DEFAULT_LOSS", "FORMATS", "ModelFormat", "file_sha256", "file_source", "load_model"]

DEFAULT_LOSS = "mse"


def _load_json(path: Path, loss: str, limits: ReadLimits) -> Graph:
    if loss != DEFAULT_LOSS:
        raise FrontendError(f"{path}: a graph file already ends in its loss; loss={loss!r} applies to .pt2 and .onnx files")
    return load_graph(path)


def _load_pt2(path: Path, loss: str, limits: ReadLimits) -> Graph:
    """The archive is read once: its bytes are hashed, checked member by member (pt2_archive) and handed to
    torch, so what torch reads is what was checked and recorded."""
    from accelsim.frontends.pt2_archive import check_archive
    from accelsim.frontends.quiet import quiet_libraries
    from accelsim.frontends.torch_export import from_exported, require_torch

    data = read_regular(path, model_file_rules(limits, "a .pt2 file (torch.export.save)"))
    check_archive(data, str(path), limits)
    torch = require_torch()
    with quiet_libraries() as heard:
        try:
            ep = torch.export.load(io.BytesIO(data))
        except Exception as e:  # a corrupt archive raises zipfile, pickle, json or torch errors
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            said = heard.first()
            also = f"; torch reported: {said}" if said and said not in first else ""
            raise FrontendError(f"{path}: not a saved torch.export program (torch.export.load: {first}{also})") \
                from None
    graph = from_exported(ep, name=path.stem, loss=loss)
    graph.source = file_source(path, hashlib.sha256(data).hexdigest(), loss if loss != DEFAULT_LOSS else None)
    return graph


def _load_onnx(path: Path, loss: str, limits: ReadLimits) -> Graph:
    from accelsim.frontends.onnx_import import load_onnx

    sha = sha256_regular(path, model_file_rules(limits, "an .onnx file (ONNX model)"))
    graph = load_onnx(path, loss=loss, limits=limits)
    graph.source = file_source(path, sha, loss if loss != DEFAULT_LOSS else None)
    return graph


@dataclass(frozen=True)
class ModelFormat:
    suffix: str
    load: Callable[[Path, str, ReadLimits], Graph]
    doc: str


FORMATS: dict[str, ModelFormat] = {f.suffix: f for f in (
    ModelFormat(".json", _load_json, "accelsim graph file (accelsim import, save_graph)"),
    ModelFormat(".pt2", _load_pt2, "saved torch.export ExportedProgram (torch.export.save)"),
    ModelFormat(".onnx", _load_onnx, "ONNX model"),
)}


def load_model(path: str | Path, *, loss: str = DEFAULT_LOSS, limits: ReadLimits = DEFAULT_READ_LIMITS) -> Graph:
    """The forward Graph in model file `path`, read by its suffix (.json, .pt2, .onnx). `loss` picks the loss
    head of a .pt2 program or an ONNX model (frontends.losses); a graph file keeps its own. `limits` bounds
    what reading a .pt2 or .onnx file may unpack and compute (accelsim.limits.ReadLimits)."""
    if not isinstance(path, (str, Path)) or not str(path):
        raise FrontendError(f"load_model needs a file path (str or pathlib.Path), got {path!r}")
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        known = ", ".join(f"{f.suffix} ({f.doc})" for f in FORMATS.values())
        raise FrontendError(f"{path}: unknown model file suffix {path.suffix!r}; expected one of {known}")
    if not os.path.lexists(path):  # a broken or looping link is named by the reader, not called missing
        raise FrontendError(f"{path}: no such model file")
    if not isinstance(limits, ReadLimits):
        raise FrontendError(f"limits must be an accelsim.limits.ReadLimits, got {limits!r}")
    return fmt.load(path, loss, limits)
