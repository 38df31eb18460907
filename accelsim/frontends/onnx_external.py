"""External data of an ONNX model (weights kept beside the .onnx file, as torch.onnx.export writes them by
default): read into the model's tensors with every location, offset and length checked first, or, for a
shape-only file whose data file is not shipped, made zeros of the declared shapes."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from accelsim.frontends.onnx_errors import OnnxImportError, fail
from accelsim.limits import ReadLimits
from accelsim.safe_file import FileRules, open_regular


def _entries(tensor: Any) -> dict[str, str]:
    return {e.key: e.value for e in tensor.external_data}


def read_external_data(model: Any, label: str, base: Path | None, limits: ReadLimits) -> None:
    """Replace every external tensor's reference by its bytes. A location must be a file inside the model's
    own directory (no absolute path, no '..'), and offset + length must lie inside that file; all bytes read
    (the model file included) stay under limits.max_file_bytes."""
    external = [t for t in model.graph.initializer if t.data_location == 1]  # TensorProto.EXTERNAL
    if not external:
        return
    if base is None:
        raise fail(f"{label}: initializer {external[0].name!r}", "keeps its data in an external file; pass the "
                                                                 "path of the .onnx file so the importer can read it")
    root = base.resolve()
    total = model.ByteSize()
    for t in external:
        where = f"{label}: initializer {t.name!r}"
        entries = _entries(t)
        location = entries.get("location", "")
        target = (root / location).resolve()
        if not location or Path(location).is_absolute() or root not in target.parents:
            raise fail(where, f"names external data location {location!r}, which is not a file inside the model's "
                              f"directory {str(root)!r}")
        if not target.exists():
            raise fail(where, f"names external data file {location!r}, which does not exist beside the model; "
                              f"for a shape-only file, import it with external_data='zeros' (zero weights)")
        # only the range is read (and counted below), so the file itself may be larger than the limit
        rules = FileRules(f"the external data file of {label}", 2**63, OnnxImportError, lambda n: "")
        with open_regular(target, rules, f"{where}: external data file {location!r}") as (f, size):
            try:
                offset = int(entries.get("offset", "0"))
                length = int(entries["length"]) if "length" in entries else size - offset
            except ValueError:
                raise fail(where, f"has a non-integer external data offset or length ({entries})") from None
            if offset < 0 or length < 0 or offset + length > size:
                raise fail(where, f"reads bytes {offset}..{offset + length} of {location!r}, which has {size} bytes")
            total += length
            if total > limits.max_file_bytes:
                raise fail(where, f"brings the bytes read to {total:,}, {_over_limit(limits)}")
            f.seek(offset)
            t.raw_data = f.read(length)
        del t.external_data[:]
        t.data_location = 0  # TensorProto.DEFAULT: the bytes are in raw_data now


def _over_limit(limits: ReadLimits) -> str:
    return (f"above the {limits.max_file_bytes:,}-byte limit on the bytes read for one model (the .onnx file and its "
            f"external data together); {ReadLimits.how_to_raise('max_file_bytes')}")


ZERO_DTYPES = ("float32", "float64")
"""The weights a shape-only import makes zeros: the float types the importer reads (onnx_read.FLOAT_TYPES)."""
EXTERNAL_DATA_MODES = ("read", "zeros")
"""How the importer treats weights kept outside the .onnx file: "read" them from the data files beside it
(read_external_data), or take the file as shape-only and make them "zeros" (zero_external_data)."""


def zero_external_data(model: Any, label: str, limits: ReadLimits) -> None:
    """Shape-only import: every float initializer whose data is external, or absent (declared dims, no values),
    becomes zeros of its declared shape, and no data file is opened. For workloads shipped as shapes only
    (ZigZag's and Stream's resnet18.onnx name a data file they do not ship): costs, schedules and mappings
    depend on shapes alone, while evaluating or checking the graph computes with zero weights. Integer
    initializers are shapes and axes the import reads, so theirs must be present. The zeros count against
    limits.max_file_bytes like bytes read, and each shape is checked before anything is allocated."""
    total = model.ByteSize()
    for t in model.graph.initializer:
        external = t.data_location == 1  # TensorProto.EXTERNAL
        absent = not external and not t.HasField("raw_data") and not any(
            len(getattr(t, f)) for f in ("float_data", "double_data", "int32_data", "int64_data"))
        if not (external or absent) or (absent and not t.dims):
            continue  # data in the file (or a scalar with none, which the size check names)
        where = f"{label}: initializer {t.name!r}"
        dtype = _element_dtype(t.data_type)
        if dtype not in ZERO_DTYPES:
            raise fail(where, f"has element type {dtype or t.data_type} and {'external' if external else 'no'} "
                              f"data; a shape-only import (external_data='zeros') makes only float32 and float64 "
                              f"weights zeros: other initializers (integer shapes and axes) must hold their values "
                              f"in the file")
        if any(d < 0 for d in t.dims):
            raise fail(where, f"has negative dimensions {list(t.dims)}")
        n = math.prod(int(d) for d in t.dims)
        if n > limits.max_tensor_elements:
            raise fail(where, f"declares {n:,} elements (dims {list(t.dims)}), above the limit of "
                              f"{limits.max_tensor_elements:,}; {ReadLimits.how_to_raise('max_tensor_elements')}")
        size = n * np.dtype(dtype).itemsize
        total += size
        if total > limits.max_file_bytes:
            raise fail(where, f"brings the bytes of the model and its zero weights to {total:,}, {_over_limit(limits)}")
        del t.external_data[:]
        t.data_location = 0  # TensorProto.DEFAULT
        t.raw_data = bytes(size)


def _element_dtype(data_type: int) -> str | None:
    """numpy's name of an ONNX element type, None for a number onnx does not know (a tampered file)."""
    import onnx.helper

    try:
        return str(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(data_type)))
    except (KeyError, ValueError, TypeError):
        return None
