"""The layer name of a torch.export node (fx node -> "layer1.0.conv1"): the path of the innermost module that
called it, as `named_modules()` spells it; the node's own name ("flatten") for an op the root module's
forward calls itself."""
from __future__ import annotations

from typing import Any


def module_path(node: Any) -> str:
    """The innermost module path of fx `node` (its nn_module_stack's last entry), else the node's name."""
    stack = node.meta.get("nn_module_stack") or {}
    path = ""
    if stack:
        entry = list(stack.values())[-1]
        path = entry[0] if isinstance(entry, tuple) and entry and isinstance(entry[0], str) else ""
    return path or str(node.name)
