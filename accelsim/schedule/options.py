"""Step options: everything that says how one step is compiled, as one frozen, validated record.

`StepOptions` is written once and used everywhere a step is described: `A.compile(graph, hw, options)` (or
its keyword arguments, which are these fields), the schedule's record of how it was compiled
(`Schedule.options`), the CLI's flags (cli/step_flags.py derives them from the fields below), a sweep
spec's `options:` and its `options.<field>` parameters (dse/spec.RunOptions extends it), and the pass
search's compiles (pass_search.auto.SearchOptions.step). Adding an option is a field here, its flag's
parser in cli/step_flags.py if the field's type needs one, and its implementation.

A schedule records the options as compile resolved them (split and the in-flight window chosen, the
graph's tensor-parallel degree); fields added after the schedule format was fixed are left out of the
JSON at their defaults, so schedules compiled before them keep their bytes.
"""
from __future__ import annotations

import math
from pathlib import Path
from numbers import Integral, Real
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_serializer, ValidationInfo

from accelsim.errors import ScheduleError
from accelsim.hw.peaks import STEP_PRECISIONS, StepPrecision  # noqa: F401  (re-exported: the precision words)
from accelsim.limits import FUSION_TILES, ZERO_STAGES  # noqa: F401  (re-exported: the stages a step may use)
from accelsim.pydantic_errors import describe_errors
from accelsim.schedule.mapping_file import mapping_entries, read_mapping_file
from accelsim.mapping.entry import LayerMapping

MAX_STEP_OPTION = 1_000_000
"""Micro-batches, replicas, stages and ranks above this are typing mistakes (the task estimate refuses far
smaller steps); bounding them here keeps every later product of them in machine integers."""
DEFAULT_EXACT_SECONDS = 10.0
"""The budget of `exact=True` and of a bare `--exact`: enough to prove the optimum of steps of a few
dozen tasks; larger steps end with a bound and a gap."""
MAX_EXACT_SECONDS = 86_400.0
"""One day: a larger budget is a typo (milliseconds for seconds), not a plan."""


SPLIT_WORDS: dict[str, bool | None] = {"auto": None, "on": True, "off": False}
"""`split` as the CLI and sweep specs spell it."""
PIPELINE_SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1")
"""The pipeline schedules a step may follow (compiler/hierarchy/schedules.py defines them)."""
GRANULARITIES = ("auto", "task", "stage")
FUSION_WORDS = ("off", "auto")
"""`fusion` besides a tile count (FUSION_TILES)."""
EFFORTS = ("fast", "default", "thorough")
GRADIENT_REDUCTIONS = ("overlap", "after-backward")
"""How data-parallel gradients are reduced: in buckets overlapped with the backward pass (PyTorch DDP, today's
Megatron-LM), or each stage's whole gradients after its backward pass (Megatron-LM of 2021: SC21's code)."""


def split_word(value: Any) -> Any:
    """`split` as a word (the CLI's and sweeps' auto/on/off) or as a bool/None."""
    return SPLIT_WORDS.get(value, value) if isinstance(value, str) else value


class StepOptions(BaseModel):
    """How one step is compiled. Every field has the default a plain `compile(graph, hw)` uses."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    microbatches: int = Field(default=1, ge=1, le=MAX_STEP_OPTION,
                              description="inputs in flight per replica (pipeline parallelism)")
    data_parallel: int = Field(default=1, ge=1, le=MAX_STEP_OPTION,
                               description="replicas working on other inputs, gradients all-reduced")
    pipeline_stages: int = Field(default=1, ge=1, le=MAX_STEP_OPTION,
                                 description="graph partitions, each on a chip of its own")
    max_in_flight: int | None = Field(default=None, ge=1, le=MAX_STEP_OPTION,
                                      description="the most micro-batches of a replica active at once (None: as "
                                                  "many as fit the fastest memory, judged by compile)")
    split: bool | None = Field(default=None, description="cut tensor nodes over their unit's instances: True, "
                                                         "False, or None to schedule both ways and keep the shorter")
    tensor_parallel: int = Field(default=1, ge=1, le=MAX_STEP_OPTION,
                                 description="ranks of a Megatron-style graph, one chip each (the graph's own)")
    zero: int = Field(default=0, ge=0, le=3, description="ZeRO stage: 0 none, 1 optimizer state, 2 + gradients, "
                                                        "3 + parameters sharded over the replicas")
    remat: str | None = Field(default=None, description="rematerialization policy applied to the training step "
                                                        "(none, sqrt, every:K, full:K, budget:BYTES)")
    exact: float | None = Field(default=None, gt=0, le=MAX_EXACT_SECONDS,
                                description="seconds of CP-SAT on the step after list scheduling (None: off)")

    pipeline_schedule: Literal["gpipe", "1f1b", "interleaved", "zb-h1"] | None = Field(
        default=None, description="the order in which each pipeline stage runs its micro-batches' forward and "
                                  "backward work: gpipe, 1f1b, interleaved (with virtual stages) or zb-h1 (None: "
                                  "the list scheduler's own order at task granularity, 1f1b at stage granularity)")
    virtual_stages: int = Field(default=1, ge=1, le=MAX_STEP_OPTION,
                                description="model chunks per pipeline chip (the interleaved schedule's v)")
    granularity: Literal["auto", "task", "stage"] = Field(
        default="auto", description="schedule every task of the step (task), compile each stage's work once and "
                                    "compose the step from it (stage), or choose by the step's size (auto)")
    effort: Literal["fast", "default", "thorough"] = Field(
        default="default", description="how much list-scheduling search a compile spends (a compile within 1% of "
                                       "its lower bound stops searching at any effort)")
    stage_layers: tuple[int, ...] | None = Field(
        default=None, description="layers per pipeline stage, first stage first (None: balanced by cost)")
    stage_boundaries: tuple[str, ...] | None = Field(
        default=None, description="names of the layers that start stages 2, 3, ... (None: balanced by cost)")
    precision: StepPrecision | None = Field(
        default=None, description="the precision the step stores and computes in: activations, working weights "
                                  "and gradients in it, fp32 master weights and optimizer state (mixed precision "
                                  "as AMP and Megatron-LM train); units run at their declared "
                                  "peak for it (None: the hardware's bytes_per_element and unit rates as they are)")

    mapping: tuple[LayerMapping, ...] | None = Field(
        default=None, description="mappings given per layer and unit (a mapping file, as --mapping-out writes it): a "
                                  "complete one is used as is, a partial one (only the dataflow, only the rows, "
                                  "...) limits the search, layers not named are searched (None: all searched); a "
                                  "schedule records the mappings chosen, not this request")

    fusion: Literal["off", "auto", 2, 4, 8, 16] = Field(
        default="off", description="layer fusion of an inference step: chains of conv, pool and elementwise layers "
                                   "computed depth-first in tiles along H: off, a tile count (2, 4, 8, 16) for every "
                                   "chain, or auto: each chain fused with the tile count its cost estimate prefers "
                                   "or left unfused, the step kept when shorter than the unfused one (then fewer "
                                   "DRAM bytes)")
    fusion_chains: tuple[tuple[int, int], ...] | None = Field(
        default=None, description="with fusion auto, the chains fused: (id of the chain's first layer in the graph "
                                  "compiled, tile count) pairs, ascending by id; a schedule records auto's per-chain "
                                  "choice here, and given, compile fuses exactly these chains (None: auto chooses)")
    gradient_reduction: Literal["overlap", "after-backward"] = Field(
        default="overlap", description="how data-parallel gradients are all-reduced: overlap (in buckets, each as the "
                                       "backward pass completes it, beside the rest of the pass: PyTorch DDP) or "
                                       "after-backward (each stage's gradients once that stage's last backward work "
                                       "is done, then its update: Megatron-LM's local DDP of 2021, as Narayanan et "
                                       "al., SC21, ran); not with ZeRO, whose reduce-scatter is its own")

    ADDED_LATER: ClassVar[tuple[str, ...]] = ("tensor_parallel", "zero", "remat", "exact", "pipeline_schedule",
                                              "virtual_stages", "granularity", "effort", "stage_layers",
                                              "stage_boundaries", "precision", "mapping", "fusion",
                                              "fusion_chains", "gradient_reduction")
    """Fields a schedule's JSON leaves out at their defaults (see the module docstring)."""

    @field_validator("gradient_reduction")
    @classmethod
    def _reduction_without_zero(cls, value: str, info: ValidationInfo) -> str:
        """after-backward is the all-reduce of whole replicas' gradients; ZeRO reduce-scatters shards instead."""
        if value != "overlap" and info.data.get("zero"):
            raise ValueError(f"{value!r} all-reduces every replica's whole gradients after the backward pass; ZeRO "
                             f"stage {info.data['zero']} reduce-scatters them into shards as the pass produces them: "
                             f"use gradient_reduction 'overlap' with ZeRO, or zero 0")
        return value

    @field_validator("split", mode="before")
    @classmethod
    def _split_words(cls, value: Any) -> Any:
        return split_word(value)

    @field_validator("fusion", mode="before")
    @classmethod
    def _fusion_word(cls, value: Any) -> Any:
        """"off", "auto" or a tile count; the CLI's and YAML's text "4" is the count 4."""
        if isinstance(value, str) and value.strip().isdecimal():
            value = int(value.strip())
        if value in FUSION_WORDS and isinstance(value, str) or (
                isinstance(value, int) and not isinstance(value, bool) and value in FUSION_TILES):
            return value
        raise ValueError(f"expected 'off', 'auto' or a tile count ({', '.join(map(str, FUSION_TILES))})")

    @field_validator("fusion_chains", mode="before")
    @classmethod
    def _fusion_pairs(cls, value: Any, info: ValidationInfo) -> Any:
        """None, or (first layer id, tile count) pairs with ascending distinct ids, for fusion auto only; the
        CLI's text "ID:T,ID:T" is those pairs."""
        if value is None:
            return None
        if isinstance(value, str):
            words = [w.strip().split(":") for w in value.split(",")]
            value = [tuple(int(x) if x.strip().isdecimal() else x for x in w) for w in words]
        pairs = [tuple(p) if isinstance(p, (list, tuple)) else p for p in value] if isinstance(value, (list, tuple)) \
            else None
        if not pairs or not all(isinstance(p, tuple) and len(p) == 2 and all(
                isinstance(x, int) and not isinstance(x, bool) for x in p) and p[0] >= 0 and p[1] in FUSION_TILES
                for p in pairs) or [p[0] for p in pairs] != sorted({p[0] for p in pairs}):
            raise ValueError(f"expected (node id >= 0, tile count in {', '.join(map(str, FUSION_TILES))}) pairs with "
                             f"ascending distinct ids, got {value!r:.80}")
        if info.data.get("fusion") != "auto":
            raise ValueError(f"the chains fused apply with fusion 'auto', not {info.data.get('fusion')!r}")
        return tuple(pairs)

    @field_validator("stage_layers", "stage_boundaries", mode="before")
    @classmethod
    def _listed(cls, value: Any, info: ValidationInfo) -> Any:
        """A list (YAML, JSON) or comma-separated text (the CLI) as the tuple it stands for."""
        if isinstance(value, str):
            value = [w.strip() for w in value.split(",")]
            if info.field_name == "stage_layers":  # counts written as text: the ones that are decimal numbers
                value = [int(w) if w.isdecimal() else w for w in value]
        return tuple(value) if isinstance(value, list) else value

    @field_validator("mapping", mode="before")
    @classmethod
    def _mapping_file(cls, value: Any) -> Any:
        """A mapping file's path (read), its parsed data (a dict), or a list of entries, as the entries."""
        if isinstance(value, (str, Path)):
            return read_mapping_file(value)
        if isinstance(value, dict):
            return mapping_entries(value, "mapping")
        value = tuple(value) if isinstance(value, list) else value
        if value is not None and not isinstance(value, tuple):
            raise ValueError(f"expected a mapping file's path, its data (a dict with one key `mappings`) or a list "
                             f"of accelsim.mapping.entry.LayerMapping, got {type(value).__name__}")
        return value

    @field_validator("remat", mode="before")
    @classmethod
    def _remat_label(cls, value: Any) -> Any:
        """A policy (text or accelsim.remat.RematPolicy) as its canonical label; "none" is no policy."""
        if value is None:
            return None
        from accelsim.remat.policy import parse_policy  # the policy syntax lives with the rewrite

        label = parse_policy(value).label
        return None if label == "none" else label

    @field_validator("exact", mode="before")
    @classmethod
    def _exact_seconds(cls, value: Any) -> Any:
        """True is DEFAULT_EXACT_SECONDS, False is off; a number must be finite."""
        if value is True:
            return DEFAULT_EXACT_SECONDS
        if value is False:
            return None
        if isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"exact must be a finite number of seconds, got {value!r}")
        return value

    @model_serializer(mode="wrap")
    def _omit_defaults_added_later(self, handler) -> dict[str, Any]:
        data = handler(self)
        for key in self.ADDED_LATER:
            if getattr(self, key) == StepOptions.model_fields[key].default:
                data.pop(key, None)
        return data

    @classmethod
    def of(cls, base: "StepOptions | None" = None, **changes: Any) -> "StepOptions":
        """`base` (default: all defaults) with `changes`, validated; ScheduleError naming every bad or
        unknown option and what is expected (the one place a step's options are checked)."""
        if base is not None and not isinstance(base, StepOptions):
            raise ScheduleError(f"options must be an accelsim StepOptions, got {type(base).__name__}")
        unknown = sorted(set(changes) - set(cls.model_fields))
        if unknown:
            raise ScheduleError(f"unknown step option(s) {', '.join(map(repr, unknown))}; the step options are "
                                f"{', '.join(cls.model_fields)}")
        # numpy integers and floats count as the Python numbers they are (a sweep's values, a script's arange)
        changes = {k: int(v) if isinstance(v, Integral) and not isinstance(v, bool) else
                   float(v) if isinstance(v, Real) and not isinstance(v, (bool, Integral)) else v
                   for k, v in changes.items()}
        values = {**(base.model_dump(exclude_defaults=False) if base is not None else {}), **changes}
        try:
            return cls(**values)
        except ValidationError as e:
            raise ScheduleError("step options: " + "; ".join(describe_errors(e.errors()))) from None

    def label(self) -> str:
        """The options that differ from the defaults, as `key=value` words (for logs and messages)."""
        shown = lambda k: f"{len(self.mapping)} given" if k == "mapping" else getattr(self, k)  # noqa: E731
        changed = [f"{k}={shown(k)}" for k in self.model_fields
                   if getattr(self, k) != StepOptions.model_fields[k].default]
        return ", ".join(changed) or "defaults"
