"""A unit's compute model, one class per YAML key (`array:`, `vector:`, `per_element:`, `stream:`): the
description of its datapath and what that description says on its own.

Each class answers, as methods, what the rest of accelsim used to find out by checking which key is set:
its peak ops per cycle (cost/roofline.py, utilization), its datapath's size in MACs (cost/area.py),
whether it has an arithmetic datapath at all (an energy per op and a precision: cost/energy.py, hw/spec.py),
whether it runs only ops with a GEMM view (cost/model.can_run), and a one-line description (`hw show`).

How many cycles a node's work takes is not a method here: it is cost physics (the systolic fold model of
cost/systolic.py), and hw/ sits left of cost/ in the pipeline (cost/ imports hw/, never the reverse), so
cost/compute.py holds it in a table keyed by these classes. Adding a model is: a ComputeModelBase subclass
here, its entry in the ComputeModel union, a `Unit` field named by its `key` (left out of the dump when
absent, so hardware hashes recorded in schedules still match), and its cycles in cost/compute.py;
tests/test_compute_models.py checks that each class has all four.
"""
from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Literal, get_args

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from accelsim.hw.fields import ArrayDim, BytesPerCycle, CyclesPerElement, Lanes, OpsPerLane, PreloadRate, Spec
from accelsim.hw.ranges import raise_problems

NumberFormat = Callable[[float], str]
"""How a description writes a non-integer figure (`hw show` passes accelsim/fmt.number)."""


def _general(x: float) -> str:
    return f"{x:g}"


class ComputeModelBase(Spec):
    """What every compute model answers. The class attributes are facts of the kind, the methods of the
    instance; an abstract method left out makes the class refuse to be instantiated."""

    key: ClassVar[str]  # the unit's YAML key that names this model
    has_datapath: ClassVar[bool] = True  # does arithmetic: has a precision, an energy per op, MACs of area
    gemm_only: ClassVar[bool] = False  # runs only ops with a GEMM view (OpDef.gemm) and is timed by that view

    @abstractmethod
    def peak_ops_per_cycle(self) -> float:
        """Ops one instance can finish per cycle at best (a MAC is 2 ops); 0 where the model has no
        arithmetic peak (data movement, per-element cost)."""

    @abstractmethod
    def macs(self) -> float:
        """Multiplier-adder pairs in one instance's datapath, the measure its derived area scales with
        (cost/area.py); 0 without an arithmetic datapath."""

    @abstractmethod
    def describe(self, number: NumberFormat = _general) -> str:
        """One line saying what the datapath is ("320x320 systolic, ws"), for `hw show`."""


class SystolicArray(ComputeModelBase):
    """A rows x cols systolic array. `fold_overlap: stationary` says the PEs double-buffer the stationary
    operand (TPU v1's MXU, Groq's MXM), so consecutive folds of a node overlap (cost/systolic.run_cycles);
    the default `none` is SCALE-Sim's back-to-back folds. `preload_rows_per_cycle`: how many rows of a
    ws/is array's stationary tile are installed per cycle (default 1, a shift chain, as SCALE-Sim)."""

    key: ClassVar[str] = "array"
    gemm_only: ClassVar[bool] = True

    rows: ArrayDim = Field(description="processing elements down the array, e.g. 128")
    cols: ArrayDim = Field(description="processing elements across the array, e.g. 128")
    dataflow: Literal["os", "ws", "is"] = Field(description=(
        "which operand stays in the PEs: os outputs, ws weights (TPU-like), is inputs"))
    fold_overlap: Literal["none", "stationary"] = Field("none", description=(
        "stationary: the PEs double-buffer the stationary operand, so folds overlap (ws or is only)"))
    preload_rows_per_cycle: PreloadRate = Field(1, description=(
        "rows of a stationary tile installed per cycle (1: a shift chain; ws or is only)"))

    @model_serializer(mode="wrap")
    def _omit_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A dump without the default keys is the dump from before the keys existed, so hardware hashes
        recorded in schedules compiled then (schedule/plan.hw_hash) still match."""
        data = handler(self)
        if self.fold_overlap == "none":
            data.pop("fold_overlap", None)
        if self.preload_rows_per_cycle == 1:
            data.pop("preload_rows_per_cycle", None)
        return data

    @model_validator(mode="after")
    def _stationary_options_need_a_stationary_operand(self) -> "SystolicArray":
        if self.fold_overlap == "stationary" and self.dataflow == "os":
            raise_problems("SystolicArray", [(("fold_overlap",), "fold_overlap 'stationary' (a double-buffered "
                                              "stationary operand) needs dataflow 'ws' or 'is'; an 'os' array "
                                              "keeps its outputs in the PEs: use fold_overlap 'none'", "stationary")])
        if self.preload_rows_per_cycle != 1 and self.dataflow == "os":
            raise_problems("SystolicArray", [(("preload_rows_per_cycle",), "preload_rows_per_cycle sets the install "
                                              "rate of a ws or is array's stationary tile; an 'os' array installs "
                                              "none: leave it out", self.preload_rows_per_cycle)])
        return self

    def peak_ops_per_cycle(self) -> float:
        """Every PE does one MAC per cycle."""
        return 2.0 * self.rows * self.cols

    def macs(self) -> float:
        """One MAC per PE."""
        return self.rows * self.cols

    def describe(self, number: NumberFormat = _general) -> str:
        overlap = f", folds overlap ({self.fold_overlap})" if self.fold_overlap != "none" else ""
        return f"{self.rows}x{self.cols} systolic, {self.dataflow}{overlap}"


class VectorLanes(ComputeModelBase):
    """`lanes` SIMD lanes, each finishing `ops_per_lane_per_cycle` elementwise ops per cycle."""

    key: ClassVar[str] = "vector"

    lanes: Lanes = Field(description="SIMD lanes, one element each per step, e.g. 256")
    ops_per_lane_per_cycle: OpsPerLane = Field(1.0, description="elementwise ops each lane finishes per cycle")

    def peak_ops_per_cycle(self) -> float:
        return self.lanes * self.ops_per_lane_per_cycle

    def macs(self) -> float:
        """A MAC is 2 ops, so the lanes' ops per cycle / 2."""
        return self.lanes * self.ops_per_lane_per_cycle / 2

    def describe(self, number: NumberFormat = _general) -> str:
        return f"{self.lanes} lanes x {number(self.ops_per_lane_per_cycle)} ops"


class PerElement(ComputeModelBase):
    """A fixed cost per output element (a unit whose speed is known per element, not per op)."""

    key: ClassVar[str] = "per_element"

    cycles_per_element: CyclesPerElement = Field(description="cycles per output element")

    def peak_ops_per_cycle(self) -> float:
        """None stated: its speed is in elements, not ops."""
        return 0.0

    def macs(self) -> float:
        """One MAC per element per cycle."""
        return 1 / self.cycles_per_element

    def describe(self, number: NumberFormat = _general) -> str:
        return f"{number(self.cycles_per_element)} cycles/element"


class Stream(ComputeModelBase):
    """Data movement at a fixed rate (a switch, DMA engine or shifter): no arithmetic datapath."""

    key: ClassVar[str] = "stream"
    has_datapath: ClassVar[bool] = False

    bytes_per_cycle: BytesPerCycle = Field(description="bytes moved per cycle")

    def peak_ops_per_cycle(self) -> float:
        return 0.0

    def macs(self) -> float:
        return 0.0

    def describe(self, number: NumberFormat = _general) -> str:
        return f"{number(self.bytes_per_cycle)} B/cycle"


ComputeModel = SystolicArray | VectorLanes | PerElement | Stream
"""Any one compute model: what Unit.model returns."""

COMPUTE_MODELS: tuple[type[ComputeModelBase], ...] = get_args(ComputeModel)
"""The models in the order units list their keys (and messages name them)."""
