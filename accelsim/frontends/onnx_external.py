"""External data of an ONNX model (weights kept beside the .onnx file, as torch.onnx.export writes them by
default): read into the model's tensors with every location, offset and length checked first."""
from __future__ import annotations

from pathlib import Path
from typing import Any

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
            raise fail(where, f"names external data file {location!r}, which does not exist beside the model")
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
