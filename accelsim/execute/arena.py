"""Memories as byte arenas: every tensor lives at its scheduled offset, so a placement or lifetime bug
that lets one tensor overwrite another live one corrupts real numbers, and is caught by name."""
from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from accelsim.schedule.plan import Schedule, Tensor, memory_label


@dataclass
class Slot:
    tensor: Tensor
    label: str
    crc: int | None = None  # checksum at write time, verified at every read


class Arenas:
    """Byte arrays per memory instance, keyed by (chip, memory). Offsets and sizes are the hardware's
    bytes; numbers are computed in the graph's dtype, which may be wider (float32 on an int8 machine),
    so every address is scaled by one factor: a uniform scaling keeps non-overlapping placements
    non-overlapping."""

    def __init__(self, schedule: Schedule, scale: int) -> None:
        self.scale = scale
        top: dict[tuple[int, str], int] = {}
        for x in schedule.tensors:
            key = (x.chip, x.memory)
            top[key] = max(top.get(key, 0), x.offset + x.size_bytes)
        self.bytes = {m: np.zeros(n * scale + 64, dtype=np.uint8) for m, n in top.items()}
        self.corruptions: list[str] = []

    def _view(self, slot: Slot, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        x = slot.tensor
        n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if n > x.size_bytes * self.scale:
            raise ValueError(f"{slot.label}: {n} bytes do not fit its {x.size_bytes * self.scale}-byte slot")
        start = x.offset * self.scale
        return self.bytes[(x.chip, x.memory)][start:start + n].view(dtype).reshape(shape)

    def write(self, slot: Slot, value: np.ndarray) -> None:
        view = self._view(slot, value.shape, value.dtype.str)
        view[...] = value
        slot.crc = zlib.crc32(view.tobytes())

    def read(self, slot: Slot, shape: tuple[int, ...], dtype: str, reader: str) -> np.ndarray:
        view = self._view(slot, shape, dtype)
        if slot.crc is not None and zlib.crc32(view.tobytes()) != slot.crc:
            x = slot.tensor
            where = f"{memory_label(x.chip, x.memory)} [{x.offset}, {x.offset + x.size_bytes})"
            self.corruptions.append(f"{slot.label} in {where} was overwritten before {reader} read it (its live "
                                    f"interval [{x.start}, {x.end}) ends too early or another tensor was placed "
                                    "over it)")
            slot.crc = None  # report each corruption once
        return view.copy()
