"""Hardware description (pydantic v2): chips of functional units and memories, an interconnect.

Quantities carry their unit in the field name (`capacity_bytes`, `clock_hz`, `bandwidth_bytes_per_cycle`)
and accept readable strings ("24 MiB", "700 MHz", "34 GB/s") where the unit is per second. Every number
is finite and inside the physical range of its kind (RANGES, hw/fields.py): later stages divide by
bandwidths, multiply by counts and round to whole cycles, so a denormal, an infinity or a 10^7 count would
surface there as a ZeroDivisionError, an OverflowError or gigabytes of tasks instead of an error naming the key.
"""
from __future__ import annotations

import difflib
from typing import Annotated, Any, Literal

from pydantic import (BeforeValidator, ConfigDict, Field, PrivateAttr, SerializerFunctionWrapHandler, StrictBool, StringConstraints,
                      WithJsonSchema, model_serializer, model_validator)

from accelsim.graph.ir import NUMPY_BYTES
from accelsim.hw.peaks import UnitPeaks
from accelsim.hw.placement import ChipPlacement
from accelsim.hw.compute import COMPUTE_MODELS, ComputeModel, PerElement, Stream, SystolicArray, VectorLanes
from accelsim.hw.dataflows import Dataflows, MappingChoice, dataflows_problems
from accelsim.hw.fields import (RANGES, AreaMm2, BytesPerCycle, BytesPerElement, BytesPerSecond, CapacityBytes,
                                ChipCount, ChipsPerNode, Energy, Hertz, LatencyCycles, Spec, UnitCount)
from accelsim.hw.gpu_gemm import GpuGemm
from accelsim.hw.gpu_overheads import GpuOverheads, phase_memory_problems
from accelsim.hw.ranges import (MAX_NAME_CHARS, NAME_PATTERN, Problem, check_in_range, check_name, check_technology_nm,
                                raise_problems)
from accelsim.hw.tech import NODES, PRECISION_OF_BYTES, Precision
from accelsim.hw.when import check_when
from accelsim.ops.registry import CATEGORIES, OPS

# Lengths of lists and strings: far above any real description, small enough that nothing downstream
# (names in messages, difflib hints, per-instance tables) can be made slow by them.
MAX_CHIP_KINDS = 64
MAX_UNITS_PER_CHIP = 256
MAX_MEMORIES_PER_CHIP = 64
MAX_OPS_PER_UNIT = 256
MAX_PORTS_PER_UNIT = 16
MAX_DESCRIPTION_CHARS = 4000


Name = Annotated[str, BeforeValidator(check_name), WithJsonSchema(
    {"type": "string", "pattern": f"^{NAME_PATTERN}$", "maxLength": MAX_NAME_CHARS,
     "description": "a plain identifier: a letter or '_', then letters, digits, '_', '.' or '-'"})]
OpName = Annotated[str, StringConstraints(max_length=64)]
UNIT_CATEGORIES = tuple(c for c in CATEGORIES if c != "leaf")

TechnologyNm = Annotated[int, BeforeValidator(check_technology_nm), WithJsonSchema(
    {"enum": sorted(NODES), "description": "a node of the published-figures table, in nm"})]
_MODEL_KEYS = tuple(c.key for c in COMPUTE_MODELS)  # a unit's compute-model keys, in the order messages name them


class Bandwidth(Spec):
    """Give exactly one of bytes per cycle or bytes per second ("34 GB/s")."""

    model_config = ConfigDict(json_schema_extra={"oneOf": [{"required": ["bandwidth_bytes_per_cycle"]},
                                                           {"required": ["bandwidth_bytes_per_s"]}]})
    bandwidth_bytes_per_cycle: BytesPerCycle | None = Field(None, description=(
        "bytes per cycle of the machine's clock (give this or bandwidth_bytes_per_s)"))
    bandwidth_bytes_per_s: BytesPerSecond | None = Field(None, description=(
        "bytes per second, e.g. '34 GB/s' (give this or bandwidth_bytes_per_cycle)"))

    @model_validator(mode="after")
    def _exactly_one_bandwidth(self) -> "Bandwidth":
        if (self.bandwidth_bytes_per_cycle is None) == (self.bandwidth_bytes_per_s is None):
            raise ValueError("give exactly one of bandwidth_bytes_per_cycle and bandwidth_bytes_per_s")
        return self

    def bytes_per_cycle(self, clock_hz: float) -> float:
        if self.bandwidth_bytes_per_cycle is not None:
            return self.bandwidth_bytes_per_cycle
        return self.bandwidth_bytes_per_s / clock_hz


class Buffer(Bandwidth):
    """A unit's dedicated input or output buffer: only its bandwidth is modelled (it caps the rate at
    which operands stream in or results out). Its capacity will be modelled by a later tile-level
    traffic model; until then it has no field, so that no file states a number nothing reads."""

    energy_pj_per_byte: Energy | None = Field(None, description="energy per byte through the buffer, in pJ")


class OperandBuffers(Bandwidth):
    """An array unit's three operand SRAMs, as SCALE-Sim configures them (IfmapSramSzkB, FilterSramSzkB,
    OfmapSramSzkB): the streamed/left operand ("input"), the right operand ("weight") and the results
    ("output"). Each fills from (or drains to) the unit's memory over its own channel of the given bandwidth;
    `double_buffered` keeps half of each as the active buffer and half for the next tile (prefetch or
    drain), so traffic overlaps compute. `traffic` picks the model: "tile" follows each operand as one stream
    through a double-buffered window of these capacities, counting its re-fetches (im2col repeats, folds that
    wrap around the window; cost/tile_traffic.py), "scalesim" replays SCALE-Sim 3.0.0's memory
    system element by element (cost/scalesim_memory.py; slow on large layers, for comparisons with it)."""

    input_bytes: CapacityBytes = Field(description="capacity of the streamed (left) operand's SRAM, e.g. '64 KiB'")
    weight_bytes: CapacityBytes = Field(description="capacity of the right operand's (weights') SRAM")
    output_bytes: CapacityBytes = Field(description="capacity of the results' SRAM")
    double_buffered: StrictBool = Field(True, description=(
        "half of each SRAM holds the active tile, half the next one, so traffic overlaps compute"))
    traffic: Literal["tile", "scalesim"] = Field("tile", description=(
        "tile: predict each operand's fetches and re-fetches through buffers of these capacities; scalesim: replay SCALE-Sim 3.0.0's memory "
        "system element by element (slow on large layers)"))
    energy_pj_per_byte: Energy | None = Field(None, description=(
        "energy per byte in pJ; leave out to derive it from the capacities"))
    area_mm2: AreaMm2 | None = Field(None, description="area of the three SRAMs together; leave out to derive it")


class Memory(Bandwidth):
    """Shared storage on a chip: on-chip SRAM, a cache, or off-chip DRAM/HBM."""

    name: Name = Field(description="the memory's name, which units' reads and writes use")
    kind: Literal["sram", "cache", "dram", "hbm"] = Field(description=(
        "on-chip SRAM or cache, or off-chip DRAM or HBM (sets derived energy and area)"))
    capacity_bytes: CapacityBytes = Field(description="how much it holds, e.g. '220 MiB' or '16 GB'")
    latency_cycles: LatencyCycles = Field(0, description="cycles from a request to its first byte")
    energy_pj_per_byte: Energy | None = Field(None, description=(
        "energy per byte read or written, in pJ; leave out to derive it from the chip's technology_nm and kind"))
    area_mm2: AreaMm2 | None = Field(None, description=(
        "area on the die; leave out to derive it (DRAM and HBM are off the die)"))


def runnable_ops() -> list[str]:
    """The op names a unit's `ops` may list: every registered op but the leaves (inputs, parameters)."""
    return sorted(o for o in OPS if OPS[o].category != "leaf")


def _op_names_schema(schema: dict[str, Any]) -> None:
    """In the JSON Schema, `ops` lists the names it accepts, so that an editor can complete them."""
    schema["items"] = {"type": "string", "enum": runnable_ops()}


class Unit(Spec):
    """A functional unit kind: what it runs (ops and/or categories, optionally only when node attributes
    match `when`), how fast (exactly one compute model, one key per class of hw/compute.py; `model` returns
    it), with `count` identical instances."""

    model_config = ConfigDict(json_schema_extra={"oneOf": [{"required": [k]} for k in _MODEL_KEYS],
                                                 "anyOf": [{"required": ["ops"]}, {"required": ["categories"]}]})
    name: Name = Field(description="the unit's name, as schedules, traces and plots show it")
    ops: list[OpName] = Field([], max_length=MAX_OPS_PER_UNIT, json_schema_extra=_op_names_schema,
                              description="ops it runs by name; a training step also needs their gradient ops")
    categories: list[Literal["elementwise", "tensor", "reduction", "data_movement"]] = Field(
        [], max_length=8, description="op categories it runs, every op of each (gradient ops included)")
    when: Annotated[dict[str, Any], BeforeValidator(check_when)] = Field({}, description=(
        "run only nodes whose attributes equal these, e.g. {kernel: [5, 5]}"))
    count: UnitCount = Field(1, description="identical instances of the unit on each chip")
    gang: StrictBool = Field(False, description=(
        "the instances work together on each node (intra-operator parallelism, e.g. a GPU's SMs)"))
    array: SystolicArray | None = Field(None, description="compute model: a systolic array (matmul, conv)")
    vector: VectorLanes | None = Field(None, description="compute model: SIMD lanes")
    per_element: PerElement | None = Field(None, description="compute model: a fixed cost per output element")
    stream: Stream | None = Field(None, description="compute model: data movement at a fixed rate")
    latency_cycles: LatencyCycles = Field(0, description="pipeline latency added to every node it runs, in cycles")
    reads: list[Name] = Field(max_length=MAX_PORTS_PER_UNIT, description=(
        "memories of the chip it reads operands from (by name); the first streams them"))
    writes: list[Name] = Field(max_length=MAX_PORTS_PER_UNIT, description=(
        "memories of the chip it writes results to (by name); the first takes them"))
    input_buffer: Buffer | None = Field(None, description="a dedicated input buffer, which caps the read rate")
    output_buffer: Buffer | None = Field(None, description="a dedicated output buffer, which caps the write rate")
    operand_buffers: OperandBuffers | None = Field(None, description=(
        "array units only: the input, weight and output SRAMs and their traffic model"))
    energy_pj_per_op: Energy | None = Field(None, description=(
        "energy per op in pJ; leave out to derive it from the chip's technology_nm and the precision"))
    precision: Precision | None = Field(None, description=(
        "the datapath's number format; leave out to take it from bytes_per_element"))
    area_mm2: AreaMm2 | None = Field(None, description="one instance's datapath area; leave out to derive it")
    peaks: UnitPeaks | None = Field(None, description=(
        "dense TFLOP/s of all its instances per step precision, e.g. {fp32: 19.5, bf16: 312}"))
    dataflows: Dataflows | None = Field(None, description="array units: the dataflows the mapper may choose from")
    mapping: MappingChoice = Field("fixed", description="array units: cost by im2col (fixed) or the mapper (search)")

    @model_validator(mode="after")
    def _check(self) -> "Unit":
        problems: list[Problem] = []
        models = [k for k in _MODEL_KEYS if getattr(self, k) is not None]
        if len(models) != 1:
            problems.append(((), f"unit {self.name!r}: give exactly one compute model of {', '.join(_MODEL_KEYS)} "
                                 f"(got {' and '.join(models) or 'none'})", None))
        if not self.ops and not self.categories:
            problems.append(((), f"unit {self.name!r}: give the ops and/or op categories it executes", None))
        runnable = runnable_ops()
        for i, op in enumerate(self.ops):
            if op not in runnable:
                close = difflib.get_close_matches(op, runnable, n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                problems.append((("ops", i), f"unit {self.name!r}: unknown op {op!r}{hint}", op))
        if self.precision is not None and len(models) == 1 and not self.model.has_datapath:
            problems.append((("precision",), f"unit {self.name!r}: a {models[0]} unit moves bytes and has no "
                             f"arithmetic datapath, so no precision: drop it", self.precision))
        if self.operand_buffers is not None and self.array is None:
            problems.append((("operand_buffers",), f"unit {self.name!r}: operand_buffers describe a systolic "
                             f"array's input, weight and output SRAMs; give the unit an `array` or drop them",
                             None))
        for port in ("reads", "writes"):
            if not getattr(self, port):
                problems.append(((port,), f"unit {self.name!r}: name the memories it {port[:-1]}s", None))
        problems += dataflows_problems(self.name, self.dataflows, self.array.dataflow if self.array else None,
                                       self.mapping)
        raise_problems("Unit", problems)
        return self

    @model_serializer(mode="wrap")
    def _omit_absent_operand_buffers(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Without operand buffers the dump is the one from before the key existed, so hardware hashes in
        schedules compiled then (schedule/plan.hw_hash) still match."""
        data = handler(self)
        if self.operand_buffers is None:
            data.pop("operand_buffers", None)
        if self.peaks is None:
            data.pop("peaks", None)
        if self.dataflows is None:
            data.pop("dataflows", None)
        if self.mapping == "fixed":
            data.pop("mapping", None)
        return data

    @property
    def model(self) -> ComputeModel:
        """The unit's compute model: the one of its keys that is set (validation leaves exactly one)."""
        for key in _MODEL_KEYS:  # a plain loop: read for every (node, unit) pair costed, 7x faster than next()
            model = getattr(self, key)
            if model is not None:
                return model
        raise AssertionError(f"unit {self.name!r} has no compute model; Unit's validator requires one")

    @property
    def compute_model(self) -> str:
        """The YAML key of the unit's compute model ("array", "vector", ...)."""
        return self.model.key


class Chip(Spec):
    """One kind of chip, `count` identical copies. Units exchange data through the chip's memories and
    their own input/output buffers (a bespoke pipeline chains units through those buffers)."""

    name: Name = Field("chip", description="the chip kind's name")
    count: ChipCount = Field(1, description="identical copies of this chip in the machine")
    technology_nm: TechnologyNm | None = Field(None, description=(
        "process node in nm; area and energy not given are derived from published figures at this node"))
    units: list[Unit] = Field(min_length=1, max_length=MAX_UNITS_PER_CHIP, description="the functional units")
    memories: list[Memory] = Field(min_length=1, max_length=MAX_MEMORIES_PER_CHIP, description=(
        "shared storage: SRAM, caches, DRAM, HBM"))
    placement: ChipPlacement = None  # after units and memories: its validator reads them (hw/placement.py)
    # left out of the dump when absent, so the hardware hashes of schedules compiled before the key hold
    gpu_overheads: GpuOverheads | None = Field(None, exclude_if=lambda v: v is None, description=(
        "a GPU-like chip's per-kernel launch and tail latency and achievable HBM fraction"))
    gpu_gemm: GpuGemm | None = Field(None, exclude_if=lambda v: v is None, description=(
        "a GPU-like chip's SMs and GEMM thread-block tiles: tile and wave quantization (hw/gpu_gemm.py)"))

    def memory(self, name: str) -> Memory:
        """The memory named `name` (a unit's reads and writes are validated to name one of them)."""
        return next(m for m in self.memories if m.name == name)

    @model_validator(mode="after")
    def _names_resolve(self) -> "Chip":
        problems: list[Problem] = []
        problems += _duplicates("unit", [u.name for u in self.units], "units")
        problems += _duplicates("memory", [m.name for m in self.memories], "memories")
        memories = {m.name for m in self.memories}
        for i, u in enumerate(self.units):
            if u.name in memories:
                problems.append((("units", i, "name"), f"unit {u.name!r} has the name of a memory of chip "
                                 f"{self.name!r}; a unit and a memory must be told apart by name", u.name))
            for port in ("reads", "writes"):
                for j, m in enumerate(getattr(u, port)):
                    if m not in memories:
                        close = difflib.get_close_matches(m, sorted(memories), n=1)
                        hint = f"did you mean {close[0]!r}? " if close else ""
                        problems.append((("units", i, port, j), f"unit {u.name!r} names memory {m!r}, which chip "
                                         f"{self.name!r} does not have ({hint}memories: "
                                         f"{', '.join(sorted(memories))})", m))
        if self.gpu_gemm is not None and self.gpu_gemm.operand_memory not in memories:
            problems.append((("gpu_gemm", "operand_memory"), f"chip {self.name!r} has no memory "
                             f"{self.gpu_gemm.operand_memory!r} (memories: {', '.join(sorted(memories))})",
                             self.gpu_gemm.operand_memory))
        problems += phase_memory_problems(self.gpu_overheads, {m.name: m.kind for m in self.memories}, self.name)
        instances = sum(u.count for u in self.units)
        rng = RANGES["unit_instances_per_chip"]
        if instances > rng.hi:
            problems.append((("units",), f"{instances} unit instances on chip {self.name!r} (the sum of the units' "
                             f"counts): {rng.describe()}", instances))
        raise_problems("Chip", problems)
        return self


Topology = Literal["ring", "fully_connected", "switch"]
CollectiveAlgorithm = Literal["ring", "tree", "auto"]


class ScaleOut(Bandwidth):
    """The network between the nodes of a two-level machine (InfiniBand-like): the chips are grouped into
    nodes of `chips_per_node` consecutive chips, the `interconnect` links the chips inside each node, and
    this network links the nodes through a non-blocking switch. `nics`: one NIC per chip (a DGX A100's
    eight HDR adapters, one beside each GPU) or one per node; the bandwidth is per NIC and direction, the
    latency one traversal of the switch (hw/topology.py routes over it)."""

    chips_per_node: ChipsPerNode = Field(description="consecutive chips that form one node")
    topology: Literal["switch"] = Field(description="the nodes meet at one non-blocking switch")
    nics: Literal["per_chip", "per_node"] = Field("per_chip", description="one NIC beside each chip, or one per node")
    link_latency_cycles: LatencyCycles = Field(0, description="cycles for one traversal of the switch")


class Interconnect(Bandwidth):
    """Links between chips (inside each node when `scale_out` is given); the bandwidth is per link and
    direction. ring: each chip links to its two neighbours; fully_connected: a link per pair of chips;
    switch: each chip has one port (an egress and an ingress direction) to a non-blocking switch, so a
    transfer a -> b occupies a's egress and b's ingress (NVSwitch-like). `collective_algorithm`: how
    all-reduces are run (schedule/collectives.py): ring, tree, or auto (the cheaper by the link model);
    ring, the default, is what every description meant before the key existed."""

    topology: Topology = Field(description=(
        "ring: each chip links to its two neighbours; fully_connected: a link per pair; switch: one port each"))
    link_latency_cycles: LatencyCycles = Field(0, description="cycles for one hop of a link")
    collective_algorithm: CollectiveAlgorithm = Field("ring", description=(
        "how all-reduces run: ring, tree, or auto (the cheaper by the link model)"))
    scale_out: ScaleOut | None = Field(None, description="a network between nodes of chips (two-level machines)")
    energy_pj_per_byte: Energy | None = Field(None, description=(
        "energy per byte over a link in pJ; leave out for an assumed SerDes figure when chips have a technology_nm"))
    area_mm2: AreaMm2 | None = Field(None, description="one link's PHYs, both ends; leave out to not count it")

    @model_serializer(mode="wrap")
    def _omit_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Without the keys added for collectives and two-level machines the dump is the one from before
        they existed, so hardware hashes in schedules compiled then (schedule/plan.hw_hash) still match."""
        data = handler(self)
        if self.collective_algorithm == "ring":
            data.pop("collective_algorithm", None)
        if self.scale_out is None:
            data.pop("scale_out", None)
        return data


class HwSpec(Spec):
    """A whole machine. `bytes_per_element` maps the graph's dtypes to the precision the hardware
    stores and computes in (e.g. float32 -> 1 for an int8 array)."""

    name: Name = Field(description="the machine's name, as reports and file names show it")
    description: str = Field("", max_length=MAX_DESCRIPTION_CHARS, description="free text: what it models and why")
    clock_hz: Hertz = Field(description="the clock every cycle count is in, e.g. '900 MHz'")
    bytes_per_element: dict[Literal["float32", "float64", "int64"], BytesPerElement] = Field(
        dict(NUMPY_BYTES), description="bytes the hardware stores each graph dtype in, e.g. float32: 2 for fp16")
    chips: list[Chip] = Field(min_length=1, max_length=MAX_CHIP_KINDS, description="the kinds of chips")
    interconnect: Interconnect | None = Field(None, description="links between chips (needed for 2 chips or more)")
    # the overrides load_hw applied to the file or name it was loaded from (hw/overrides.py), recorded
    # in schedules so a run can be reproduced; not part of the dump, so not of the hardware hash
    _overrides: dict[str, Any] = PrivateAttr(default_factory=dict)
    _step_precision: str | None = PrivateAttr(default=None)  # set by hw/precision.at_precision only

    @property
    def overrides(self) -> dict[str, Any]:
        return dict(self._overrides)

    @property
    def step_precision(self) -> str | None:
        """The step precision this copy was resolved for (hw/precision.py), None: bytes_per_element alone."""
        return self._step_precision

    @model_validator(mode="after")
    def _machine_is_consistent(self) -> "HwSpec":
        problems: list[Problem] = _duplicates("chip", [c.name for c in self.chips], "chips")
        n = self.n_chips
        if n > RANGES["total_chips"].hi:
            problems.append((("chips",), f"{n} chips in all (the sum of the chips' counts): "
                             f"{RANGES['total_chips'].describe()}", n))
        if n > 1 and self.interconnect is None:
            problems.append(((), f"{n} chips need an interconnect (topology, link bandwidth, latency)", None))
        problems += self._nodes_divide_the_chips()
        problems += self._per_second_bandwidths_in_range()
        problems += self._precisions_resolve()
        raise_problems("HwSpec", problems)
        return self

    def _nodes_divide_the_chips(self) -> list[Problem]:
        """A switch needs chips to switch between, and a two-level machine at least two nodes of equal
        size, each of two chips or more (in a node of one chip the interconnect would link nothing)."""
        ic, n = self.interconnect, self.n_chips
        if ic is None:
            return []
        so = ic.scale_out
        if so is None:
            if ic.topology == "switch" and n == 1:
                return [(("interconnect", "topology"), "topology 'switch' joins chips through one switch, but the "
                         "machine has 1 chip: there is nothing to switch between; give chips a count above 1 or "
                         "drop the interconnect", ic.topology)]
            return []
        loc = ("interconnect", "scale_out", "chips_per_node")
        if n % so.chips_per_node:
            sizes = [d for d in range(2, n) if n % d == 0]
            expected = (f"expected one of {', '.join(map(str, sizes))}" if sizes else
                        f"{n} chips cannot form two or more equal nodes; drop scale_out")
            return [(loc, f"the machine's {n} chips (the sum of the chips' counts) do not divide into nodes of "
                     f"{so.chips_per_node} chips; {expected}", so.chips_per_node)]
        if so.chips_per_node == n:
            return [(("interconnect", "scale_out"), f"scale_out joins nodes, but chips_per_node {n} puts all {n} "
                     f"chips in one node: a single-node machine has no network between nodes; drop scale_out "
                     f"(the interconnect alone links the chips) or give fewer chips per node", None)]
        if so.chips_per_node == 1:
            return [(loc, f"chips_per_node 1 makes every chip its own node, so the interconnect ({ic.topology}) "
                     f"inside a node would link nothing; expected 2 or more chips per node, or no scale_out "
                     f"(the interconnect alone then links the chips)", 1)]
        return []

    def _precisions_resolve(self) -> list[Problem]:
        """On a chip whose figures come from the technology table, every arithmetic unit has a precision
        the table knows: its own, or the default bytes_per_element gives."""
        problems: list[Problem] = []
        for c, chip in enumerate(self.chips):
            if chip.technology_nm is None:
                continue
            for i, u in enumerate(chip.units):
                derived = u.energy_pj_per_op is None or u.area_mm2 is None
                if u.model.has_datapath and derived and self.precision(u) is None:
                    problems.append((("chips", c, "units", i, "precision"), f"unit {u.name!r} on chip {chip.name!r} "
                                     f"(technology_nm {chip.technology_nm}) needs a precision: float32 is stored in "
                                     f"{self.elem_bytes('float32')} bytes, which names none (1: int8, 2: fp16, 4: "
                                     f"fp32); give precision: int8, int16, int32, fp16 or fp32", None))
        return problems

    def precision(self, unit: Unit) -> str | None:
        """The unit's datapath format: its own `precision`, else the one the hardware's float32 bytes imply
        (hw/tech.py PRECISION_OF_BYTES: 1 -> int8, 2 -> fp16, 4 -> fp32); None for other byte counts."""
        return unit.precision or PRECISION_OF_BYTES.get(self.elem_bytes("float32"))

    def _per_second_bandwidths_in_range(self) -> list[Problem]:
        """A bandwidth in bytes/s becomes bytes per cycle through the clock; both ends must be physical."""
        found: list[tuple[tuple[str | int, ...], Bandwidth | None]] = [(("interconnect",), self.interconnect)]
        if self.interconnect is not None:
            found.append((("interconnect", "scale_out"), self.interconnect.scale_out))
        for c, chip in enumerate(self.chips):
            found += [(("chips", c, "memories", i), m) for i, m in enumerate(chip.memories)]
            for i, u in enumerate(chip.units):
                found += [(("chips", c, "units", i, b), getattr(u, b)) for b in ("input_buffer", "output_buffer")]
        problems: list[Problem] = []
        rng = RANGES["bytes_per_cycle"]
        for loc, bw in found:
            if bw is None or bw.bandwidth_bytes_per_s is None:
                continue
            per_cycle = bw.bandwidth_bytes_per_s / self.clock_hz
            try:
                check_in_range(per_cycle, rng)
            except ValueError:
                problems.append(((*loc, "bandwidth_bytes_per_s"), f"{bw.bandwidth_bytes_per_s:g} bytes/s at a "
                                 f"{self.clock_hz:g} Hz clock is {per_cycle:g} bytes per cycle: {rng.describe()}",
                                 bw.bandwidth_bytes_per_s))
        return problems

    @property
    def n_chips(self) -> int:
        return sum(c.count for c in self.chips)

    def elem_bytes(self, dtype: str) -> int:
        return self.bytes_per_element.get(dtype, NUMPY_BYTES[dtype])


def _duplicates(what: str, names: list[str], key: str) -> list[Problem]:
    first: dict[str, int] = {}
    problems: list[Problem] = []
    for i, n in enumerate(names):
        if n in first:
            problems.append(((key, i, "name"), f"two {what}s are named {n!r} ({key}[{first[n]}] and {key}[{i}])", n))
        first.setdefault(n, i)
    return problems
