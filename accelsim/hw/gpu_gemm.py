"""How a GPU-like chip's GEMM library tiles a matrix product over its SMs (a chip's `gpu_gemm:` key):
declared hardware data; cost/gpu_gemm.py charges it. A dataflow chip folds a GEMM over its arrays as the
static schedule says; a GPU runs it as one kernel whose thread blocks each compute one output tile of a few
fixed shapes, in waves of one block per SM, so its time steps with tiles and waves, not with the flops.

- sms: the streaming multiprocessors a kernel's thread blocks are spread over (one wave = one block per SM).
- tiles: the thread-block output tiles (rows x columns of the output) the library chooses from.
- tile_fraction: the share of one SM's Tensor Core peak a block's main loop sustains on a full tile (the
  best measured GEMM over all shapes: a bound no shape may exceed; cost/gpu_gemm.py adds each tile's wait
  for its first operands and its epilogue store).
- operand_memory: the chip memory the blocks read their operand tiles from (its bandwidth is shared by the
  blocks running at once).
"""
from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Field, WithJsonSchema

from accelsim.hw.fields import Spec
from accelsim.hw.ranges import Range, check_name, in_range

SMS = Range(1, 100_000, "SMs", integer=True, why="a GPU has tens to hundreds of SMs; 100,000 is no GPU")
TILE_EDGE = Range(1, 4096, "elements", integer=True, why=(
    "a thread-block tile edge: libraries use 16 to 256; above 4,096 no SM's registers hold the tile"))
TILE_FRACTION = Range(0.01, 1, "of one SM's peak", why=(
    "1 is the datasheet peak, below 1% is no Tensor Core"))
MAX_TILES = 32


def _schema(rng: Range, kind: str = "number") -> WithJsonSchema:
    return WithJsonSchema({"type": kind, "minimum": rng.lo, "maximum": rng.hi, "description": rng.describe()})


Sms = Annotated[int, BeforeValidator(in_range(SMS)), _schema(SMS, "integer")]
TileEdge = Annotated[int, BeforeValidator(in_range(TILE_EDGE)), _schema(TILE_EDGE, "integer")]
TileFraction = Annotated[float, BeforeValidator(in_range(TILE_FRACTION)), _schema(TILE_FRACTION)]
Tile = Annotated[tuple[TileEdge, TileEdge], WithJsonSchema({  # a pair, in the schema's plain array keywords
    "type": "array", "items": {"type": "integer", "minimum": TILE_EDGE.lo, "maximum": TILE_EDGE.hi},
    "minItems": 2, "maxItems": 2, "description": "[rows, columns] of one thread-block output tile"})]
MemoryName = Annotated[str, BeforeValidator(check_name), WithJsonSchema({"type": "string"})]


class GpuGemm(Spec):
    """The SMs a GEMM kernel's thread blocks spread over, the output tiles its library chooses from, the
    share of an SM's peak a full tile sustains, and the memory its operand tiles come from."""

    sms: Sms = Field(description="streaming multiprocessors: one thread block per SM makes one wave")
    tiles: tuple[Tile, ...] = Field(min_length=1, max_length=MAX_TILES, description=(
        "thread-block output tiles [rows, columns] the GEMM library chooses from"))
    tile_fraction: TileFraction = Field(description=(
        "share of one SM's Tensor Core peak a block sustains on a full tile (0.01 to 1)"))
    operand_memory: MemoryName = Field(description=(
        "the chip memory the blocks read operand tiles from; its bandwidth is shared by the running blocks"))
