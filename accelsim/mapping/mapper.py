"""The mapper: the best mapping of a layer on an array unit for an objective, within a deterministic budget
of evaluated mappings: (HwSpec, Chip, Unit, LayerDims, MapperOptions) -> MappingCost.

A space of at most `budget` points is searched exhaustively. A larger one is searched by seeded random
sampling (half the budget) and then a local search from the best point found (the rest): each step tries
one neighbouring mapping and keeps it if it is no worse. The fixed point (im2col in the unit's own
dataflow, today's model) is always evaluated first and kept unless something beats it, so the mapper never
returns a mapping worse than today's on its objective. Ties go to the point evaluated first. Wall time
plays no part: the same inputs and seed give the same mapping.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from accelsim.hw.spec import Chip, HwSpec, Unit
from accelsim.mapping.cost import MappingCost, mapping_cost, unit_dataflows
from accelsim.mapping.dims import LayerDims
from accelsim.mapping.errors import MappingSpecError
from accelsim.mapping.fixed import im2col_mapping
from accelsim.mapping.given import allows, constrained_space, given_mapping
from accelsim.mapping.space import mapping_space
from accelsim.mapping.entry import LayerMapping

OBJECTIVES = ("latency", "energy", "edp")
MAX_BUDGET = 1_000_000


@dataclass(frozen=True, slots=True)
class MapperOptions:
    """What the mapper optimizes and how much it may evaluate."""

    objective: str = "latency"
    budget: int = 2000  # mappings evaluated at most, per (layer, unit)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise MappingSpecError(f"mapper objective {self.objective!r}: expected one of {', '.join(OBJECTIVES)}")
        if isinstance(self.budget, bool) or not isinstance(self.budget, int) or not 1 <= self.budget <= MAX_BUDGET:
            raise MappingSpecError(f"mapper budget {self.budget!r}: expected a whole number of mappings to "
                                   f"evaluate, 1 to {MAX_BUDGET:,}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise MappingSpecError(f"mapper seed {self.seed!r}: expected an integer")


def objective_value(cost: MappingCost, objective: str, unit: str = "?") -> float:
    """Cycles (latency), pJ (energy) or cycles x pJ (edp) of a mapping on `unit`; lower is better."""
    if objective == "latency":
        return cost.cycles
    if cost.energy_pj is None:
        raise MappingSpecError(f"mapper objective {objective!r} needs energy figures, and unit {unit!r} has none: "
                               f"give it energy_pj_per_op or its chip a technology_nm, or use objective 'latency'")
    return cost.energy_pj if objective == "energy" else cost.energy_pj * cost.cycles


def search_mapping(hw: HwSpec, chip: Chip, unit: Unit, layer: LayerDims, options: MapperOptions,
                   given: LayerMapping | None = None) -> MappingCost:
    """The best mapping found for `layer` on `unit` (module docstring); never worse than the fixed point.
    `given`: a user's mapping for the layer (mapping/given.py): a complete one is costed as is, a partial one
    limits the search to the points that agree with it (the fixed point is then the first of those unless
    it agrees too)."""
    array = unit.array
    if array is None:
        raise MappingSpecError(f"unit {unit.name!r} has no systolic array ({unit.compute_model} model); only array "
                               f"units are mapped")
    if given is not None and given.complete:
        return mapping_cost(hw, chip, unit, layer, given_mapping(layer, given, array.rows, array.cols))
    space = mapping_space(layer, array.rows, array.cols, unit_dataflows(unit), unit.operand_buffers is not None)
    start = im2col_mapping(layer, array.dataflow)
    if given is not None:
        space = constrained_space(space, given)
        if not allows(space, start):
            start = next(space.enumerate())
    best = mapping_cost(hw, chip, unit, layer, start)
    rank_of = lambda cost: (objective_value(cost, options.objective, unit.name), cost.cycles)  # noqa: E731
    best_rank = rank_of(best)
    seen = {best.mapping}
    evaluated = 1

    def consider(mapping) -> bool:
        nonlocal best, best_rank, evaluated
        if mapping in seen:
            return False
        seen.add(mapping)
        evaluated += 1
        cost = mapping_cost(hw, chip, unit, layer, mapping)
        rank = rank_of(cost)
        if rank < best_rank:
            best, best_rank = cost, rank
            return True
        return rank == best_rank

    if space.size() <= options.budget:
        for mapping in space.enumerate():
            consider(mapping)
        return best
    rng = random.Random(options.seed)
    draws = 0
    while evaluated < options.budget // 2 and draws < 4 * options.budget:
        draws += 1
        consider(space.sample(rng))
    current = best.mapping
    while evaluated < options.budget and draws < 3 * options.budget:
        draws += 1
        candidate = space.neighbour(current, rng)
        if consider(candidate):
            current = candidate
    return best
