"""Read an ONNX model and check it before anything is converted (path or ModelProto -> CheckedModel).

Everything a hostile or broken file can get wrong is refused here, in one paragraph naming the file
and the node, input or initializer: not protobuf, too large, declared sizes that do not match the
bytes, external data, unsupported opsets, cycles, dangling inputs, dynamic shapes, NaN weights.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Mapping

import numpy as np

from accelsim.frontends.onnx_errors import INSTALL_HINT, OnnxImportError, fail, one_line
from accelsim.frontends.onnx_external import EXTERNAL_DATA_MODES, read_external_data, zero_external_data
from accelsim.frontends.onnx_functions import inline_functions
from accelsim.frontends.onnx_structure import check_structure
from accelsim.frontends.onnx_version import CONVERTED_OPSET, convert_opset
from accelsim.limits import DEFAULT_READ_LIMITS, ReadLimits
from accelsim.safe_file import FileRules, read_regular

MIN_OPSET = 13
"""Oldest default-domain opset whose operator signatures the converters implement (axes as inputs of
Squeeze, Unsqueeze, ReduceSum and Split; single-axis Softmax); older models are converted first
(onnx_version.py)."""
DEFAULT_DOMAINS = ("", "ai.onnx")
FLOAT_TYPES = {1: "float32", 11: "float64"}  # TensorProto.FLOAT, DOUBLE
STATIC_TYPES = {6: "int32", 7: "int64", 9: "bool"}  # integer initializers are shapes, axes, indices
INPUT_TYPES = {**FLOAT_TYPES, 7: "int64"}
SKELETON_KEEPS_ELEMENTS = 1024  # initializers up to this size stay in the model the checker sees


@dataclass(frozen=True)
class CheckedModel:
    """A model that passed every check: its graph's nodes in topological order, its opset, its
    decoded initializers (by ONNX name) and its non-initializer inputs with static shapes."""

    model: Any  # onnx.ModelProto
    label: str  # how errors name it: the file path, or the model's graph name
    opset: int
    dtype: str  # the float dtype of the model's weights and inputs
    initializers: Mapping[str, np.ndarray]
    inputs: Mapping[str, tuple[tuple[int, ...], str]]  # name -> (shape, dtype)
    nodes: tuple[Any, ...]  # onnx.NodeProto, topologically sorted


def require_onnx() -> ModuleType:
    """The onnx package, imported only when a model is imported (`import accelsim` never loads it)."""
    try:
        import onnx
    except ImportError as e:
        raise OnnxImportError(f"importing ONNX models needs the onnx package, which is not installed ({e}); "
                              f"{INSTALL_HINT}") from None
    return onnx


def read_model(source: Any, limits: ReadLimits = DEFAULT_READ_LIMITS, external_data: str = "read") -> CheckedModel:
    """Parse (from a path) and check an ONNX model; every problem is one OnnxImportError paragraph.
    external_data: "read" the weights kept outside the file, or "zeros" for a shape-only file
    (onnx_external.zero_external_data)."""
    if external_data not in EXTERNAL_DATA_MODES:
        raise OnnxImportError(f"external_data must be one of {', '.join(map(repr, EXTERNAL_DATA_MODES))}, got "
                              f"{external_data!r}")
    onnx = require_onnx()
    model, label = _parse(onnx, source, limits)
    opset = _opset(model, label)
    if external_data == "zeros":
        zero_external_data(model, label, limits)
    else:
        read_external_data(model, label, Path(source).parent if isinstance(source, (str, Path)) else None, limits)
    _check_declared_sizes(model, label, limits)
    model = inline_functions(model, label, limits)
    nodes = check_structure(model.graph, label)
    del model.graph.node[:]
    model.graph.node.extend(nodes)  # the checker wants a topological order; a file may list another
    _run_checker(onnx, model, label)
    if opset < MIN_OPSET:
        model = convert_opset(model, label, opset)
        opset = CONVERTED_OPSET
        nodes = check_structure(model.graph, label)
    initializers = _decode_initializers(onnx, model, label)
    inputs = _static_inputs(model, label, set(initializers), limits)
    dtype = _float_dtype(label, initializers, inputs)
    return CheckedModel(model, label, opset, dtype, initializers, inputs, tuple(model.graph.node))


def _parse(onnx: ModuleType, source: Any, limits: ReadLimits) -> tuple[Any, str]:
    if isinstance(source, onnx.ModelProto):
        label = f"ONNX model {source.graph.name or '(unnamed graph)'!r}"
        size = source.ByteSize()
        if size > limits.max_file_bytes:
            raise fail(label, _too_large(size, limits))
        copy = onnx.ModelProto()
        copy.CopyFrom(source)  # the importer reorders nodes and inlines functions on its own copy
        return copy, label
    if not isinstance(source, (str, Path)):
        raise OnnxImportError(f"expected an onnx.ModelProto or the path of an .onnx file, got "
                              f"{type(source).__name__}")
    path = Path(source)
    label = str(path)
    rules = FileRules("an .onnx file", limits.max_file_bytes, OnnxImportError, lambda n: _too_large(n, limits))
    data = read_regular(path, rules, label)
    if not data:
        raise fail(label, "is empty; expected an ONNX model (protobuf)")
    try:
        model = onnx.load_model_from_string(data)
    except Exception as e:  # protobuf's DecodeError, or a RuntimeError from its C++ parser
        raise fail(label, f"is not an ONNX model: protobuf parsing failed ({one_line(e, 120)}); the file is "
                          "truncated or in another format") from None
    if not model.graph.node and not model.graph.output:
        raise fail(label, "is not an ONNX model: it parses as protobuf but holds no graph (truncated or another "
                          "format)")
    return model, label


def _too_large(size: int, limits: ReadLimits) -> str:
    return (f"is {size:,} bytes, above the {limits.max_file_bytes:,}-byte limit on the bytes read for one model; "
            f"{ReadLimits.how_to_raise('max_file_bytes')}")


def _opset(model: Any, label: str) -> int:
    import onnx.defs

    newest = onnx.defs.onnx_opset_version()
    versions = {o.domain: o.version for o in model.opset_import}
    opset = next((versions[d] for d in DEFAULT_DOMAINS if d in versions), None)
    if opset is None:
        raise fail(label, "opset_import has no entry for the default ONNX domain; re-export the model")
    if not 1 <= opset <= newest:
        raise fail(label, f"uses default-domain opset {opset}; the installed onnx package knows opsets 1..{newest} "
                          f"(opsets below {MIN_OPSET} are converted to {CONVERTED_OPSET}); re-export the model with "
                          f"torch.onnx.export(..., opset_version={CONVERTED_OPSET}) or upgrade onnx")
    return int(opset)


def _numel(dims: Any) -> int:
    return math.prod(int(d) for d in dims)


def dtype_name(data_type: int) -> str:
    """ONNX's name of an element type, or what the number is when onnx knows no such type (a tampered file)."""
    import onnx  # the `onnx` extra: only a model already parsed by it gets here

    if not data_type:
        return "UNDEFINED"
    try:
        return onnx.helper.tensor_dtype_to_string(data_type)
    except (KeyError, ValueError):
        return f"number {data_type} (no ONNX element type)"


def _check_declared_sizes(model: Any, label: str, limits: ReadLimits) -> None:
    """Initializers' dims against the limits and against the bytes they hold, before decoding any
    (external data has been read into raw_data by then)."""
    import onnx.helper

    total = 0
    for t in model.graph.initializer:
        where = f"{label}: initializer {t.name!r}"
        if any(d < 0 for d in t.dims):
            raise fail(where, f"has negative dimensions {list(t.dims)}")
        n = _numel(t.dims)
        if n > limits.max_tensor_elements:
            raise fail(where, f"declares {n} elements (dims {list(t.dims)}), above the limit of "
                              f"{limits.max_tensor_elements}; {ReadLimits.how_to_raise('max_tensor_elements')}")
        total += n
        if total > limits.max_total_elements:
            raise fail(where, f"brings the initializers to {total} elements, above the limit of "
                              f"{limits.max_total_elements}; {ReadLimits.how_to_raise('max_total_elements')}")
        if t.data_type not in FLOAT_TYPES and t.data_type not in STATIC_TYPES:
            name = dtype_name(t.data_type)
            raise fail(where, f"has element type {name}; the importer reads float32 and float64 weights and "
                              "int32/int64/bool constants")
        itemsize = np.dtype({**FLOAT_TYPES, **STATIC_TYPES}[t.data_type]).itemsize
        if t.HasField("raw_data"):
            held, what = len(t.raw_data), f"{len(t.raw_data)} bytes of raw_data"
            expected = n * itemsize
        else:
            held = max(len(t.float_data), len(t.double_data), len(t.int32_data), len(t.int64_data))
            what, expected = f"{held} values", n
        if held != expected:
            raise fail(where, f"declares dims {list(t.dims)} ({n} elements, {expected} "
                              f"{'bytes' if t.HasField('raw_data') else 'values'}) but holds {what}")


def _run_checker(onnx: ModuleType, model: Any, label: str) -> None:
    """The ONNX checker and strict shape inference, on a skeleton of the model: large initializers are
    declared as typed graph inputs instead (their sizes were checked already), so the checks do not
    serialize the weights (a 45 MB ResNet-18 took 1.4 s with them, 0.1 s without)."""
    skeleton = onnx.ModelProto()
    skeleton.CopyFrom(model)
    del skeleton.graph.initializer[:]
    listed = {vi.name for vi in skeleton.graph.input}
    for t in model.graph.initializer:
        if _numel(t.dims) <= SKELETON_KEEPS_ELEMENTS:
            skeleton.graph.initializer.append(t)  # small ones may be shapes that inference propagates
        elif t.name not in listed:
            skeleton.graph.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    try:
        onnx.checker.check_model(skeleton)
        onnx.shape_inference.infer_shapes(skeleton, check_type=True, strict_mode=True)
    except onnx.checker.ValidationError as e:
        raise fail(label, f"fails the ONNX checker: {one_line(e)}") from None
    except onnx.shape_inference.InferenceError as e:
        raise fail(label, f"fails ONNX shape inference: {one_line(e)}") from None
    except UnicodeDecodeError as e:  # a name or attribute string that is not UTF-8 (protobuf keeps the bytes)
        raise fail(label, f"holds a string that is not UTF-8 ({e.reason} at byte {e.start}); ONNX strings are "
                          "UTF-8") from None


def _decode_initializers(onnx: ModuleType, model: Any, label: str) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for t in model.graph.initializer:
        where = f"{label}: initializer {t.name!r}"
        if t.name in out:
            raise fail(where, "is defined twice")
        try:
            arr = onnx.numpy_helper.to_array(t)
        except Exception as e:  # a corrupt tensor: onnx raises ValueError or TypeError
            raise fail(where, f"cannot be decoded ({one_line(e, 160)})") from None
        # NaN is never a weight; an infinity only as a one-element constant (an attention mask's fill value)
        bad_mask = (np.isnan(arr) if arr.size == 1 else ~np.isfinite(arr)) if arr.dtype.kind == "f" else None
        if bad_mask is not None and bad_mask.any():
            index = tuple(int(i) for i in np.argwhere(bad_mask)[0])
            raise fail(where, f"holds a non-finite value ({arr[index]}) at index {index}; weights must be finite "
                              "numbers")
        out[t.name] = arr
    return out


def _static_inputs(model: Any, label: str, initializers: set[str],
                   limits: ReadLimits) -> dict[str, tuple[tuple[int, ...], str]]:
    out: dict[str, tuple[tuple[int, ...], str]] = {}
    for vi in model.graph.input:
        if vi.name in initializers:
            continue  # an initializer listed as an input (IR < 4): a weight with a default value
        where = f"{label}: input {vi.name!r}"
        if not vi.type.HasField("tensor_type"):
            raise fail(where, "is not a tensor; the importer reads tensor inputs only")
        tt = vi.type.tensor_type
        if tt.elem_type not in INPUT_TYPES:
            raise fail(where, f"has element type {tt.elem_type}; inputs must be float32, float64 or int64")
        if not tt.HasField("shape"):
            raise fail(where, "has no shape; accelsim needs static shapes: export with fixed input shapes")
        shape = []
        for axis, d in enumerate(tt.shape.dim):
            if not d.HasField("dim_value"):
                sym = f" ({d.dim_param!r})" if d.dim_param else ""
                raise fail(where, f"axis {axis} is dynamic{sym}; accelsim schedules static shapes only: export "
                                  "with fixed shapes (torch.onnx.export without dynamic_axes or dynamic_shapes)")
            if d.dim_value < 1:
                raise fail(where, f"axis {axis} has size {d.dim_value}; sizes must be at least 1")
            shape.append(int(d.dim_value))
        if _numel(shape) > limits.max_tensor_elements:
            raise fail(where, f"shape {tuple(shape)} has {_numel(shape)} elements, above the limit of "
                              f"{limits.max_tensor_elements}; {ReadLimits.how_to_raise('max_tensor_elements')}")
        out[vi.name] = (tuple(shape), INPUT_TYPES[tt.elem_type])
    return out


def _float_dtype(label: str, initializers: Mapping[str, np.ndarray],
                 inputs: Mapping[str, tuple[tuple[int, ...], str]]) -> str:
    """The one float dtype of the model's weights and inputs (float32 when it has none)."""
    found = {str(a.dtype): name for name, a in initializers.items() if a.dtype.kind == "f"}
    found.update({dtype: name for name, (_, dtype) in inputs.items() if dtype in FLOAT_TYPES.values()})
    if len(found) > 1:
        detail = ", ".join(f"{dtype} ({name!r})" for dtype, name in sorted(found.items()))
        raise fail(label, f"mixes float dtypes {detail}; accelsim computes a graph in one float dtype")
    return next(iter(found), "float32")
