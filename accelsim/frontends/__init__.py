"""Frontends: models from outside accelsim become Graphs (a torch module or ExportedProgram, an ONNX file, a
saved graph file). torch and onnx are imported lazily: `import accelsim.frontends` needs neither."""
from __future__ import annotations

from typing import Any

from accelsim.frontends.graph_file import load_graph, save_graph
from accelsim.frontends.model_file import load_model

__all__ = ["from_onnx", "from_torch", "load_graph", "load_model", "save_graph"]


def from_torch(module: Any, example_inputs: Any, *, name: str | None = None, loss: str = "mse"):
    """The forward Graph of a torch.nn.Module through torch.export (see frontends.torch_export.from_torch)."""
    from accelsim.frontends.torch_export import from_torch as run

    return run(module, example_inputs, name=name, loss=loss)


def __getattr__(name: str) -> Any:
    """`from_onnx` comes from the ONNX importer module, loaded (with onnx) only when asked for."""
    if name == "from_onnx":
        from accelsim.frontends.onnx_import import from_onnx

        return from_onnx
    raise AttributeError(f"module 'accelsim.frontends' has no attribute {name!r}")
