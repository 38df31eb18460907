"""The rules of a sweep spec that span fields, checked before any work: known metrics and options,
well-formed constraints, search settings that fit the method, a bounded number of points, and every
parameter value accepted where it goes (hardware schema, model zoo, step options). Each problem is
one line `key.path: message`."""
from __future__ import annotations

import math
from typing import Any

from pydantic import ValidationError

from accelsim import models
from accelsim.errors import AccelsimError, HwConfigError
from accelsim.hw.load import parse_hw
from accelsim.hw.overrides import apply_overrides
from accelsim.hw.spec import HwSpec
from accelsim.pydantic_errors import describe_errors
from accelsim.dse.constraints import Constraint, parse_constraint
from accelsim.dse.metrics import DEFAULT_OBJECTIVES, METRICS, unknown_metric
from accelsim.dse.params import TIE, Parameter, parameters
from accelsim.dse.spec import MAX_POINTS, RESULT_OPTIONS, RunOptions, SweepSpec

MAX_TOTAL_VALUES = 5_000
"""Values listed over all parameters: each is validated on its own (about 1 ms for a hardware value)."""
_HW_WHERE = "hardware"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def metric_columns(spec: SweepSpec) -> list[str]:
    """The metric columns of the results, in order: `metrics` (default: every metric the options
    produce), then objectives and constrained metrics not listed there."""
    listed = spec.metrics if spec.metrics is not None else \
        [m.name for m in METRICS.values() if m.needs is None or getattr(spec.options, m.needs)]
    extra = list(spec.search.objectives or {}) + [c.metric for c in constraints(spec) if c.metric]
    return list(dict.fromkeys(m for m in [*listed, *extra] if m in METRICS))


def objectives(spec: SweepSpec) -> dict[str, str]:
    """The search's objectives, or for a grid or random search that names none, the default ones
    among its metric columns (what the Pareto plots show)."""
    if spec.search.objectives:
        return dict(spec.search.objectives)
    columns = metric_columns(spec)
    return {k: v for k, v in DEFAULT_OBJECTIVES.items() if k in columns}


def constraints(spec: SweepSpec) -> list[Constraint]:
    """The parsed constraints (call after check_spec, which reports the malformed ones)."""
    return [c for c in map(parse_constraint, spec.constraints) if isinstance(c, Constraint)]


def _metric_problems(spec: SweepSpec) -> list[str]:
    problems = []
    for i, name in enumerate(spec.metrics or []):
        if name not in METRICS:
            problems.append(f"metrics[{i}]: {unknown_metric(name, _shown(name))}")
        elif name in spec.metrics[:i]:
            problems.append(f"metrics[{i}]: lists {name!r} twice")
    for name in spec.search.objectives or {}:
        if name not in METRICS:
            problems.append(f"search.objectives.{name}: {unknown_metric(name, _shown(name))}")
    for i, text in enumerate(spec.constraints):
        parsed = parse_constraint(text)
        if isinstance(parsed, str):
            problems.append(f"constraints[{i}]: {parsed}")
    for name in metric_columns(spec):
        needs = METRICS[name].needs
        if needs is not None and not getattr(spec.options, needs):
            problems.append(f"metrics: {name} is recorded only with options.{needs}: true")
    return problems


def _search_problems(spec: SweepSpec, params: list[Parameter]) -> list[str]:
    s, problems = spec.search, []
    given = s.model_fields_set
    if s.method != "optuna":
        problems += [f"search.{k}: applies to method optuna only" for k in ("sampler", "batch") if k in given]
    if s.method == "grid":
        if s.points is not None:
            problems.append("search.points: a grid runs every combination of the parameters' values; remove "
                            "points, or use method: random or optuna")
        problems += [f"parameters.{p.key}: a range needs search.method random or optuna; a grid takes a list "
                     f"of values" for p in params if p.range is not None]
        size = math.prod(p.count() for p in params)
        if not problems and size > MAX_POINTS:
            counts = " x ".join(str(int(p.count())) for p in params)
            problems.append(f"parameters: the grid has {size:,} points ({counts}), more than the limit of "
                            f"{MAX_POINTS:,}; list fewer values, or use method: random with points")
        return problems
    if s.points is None:
        problems.append(f"search.points: required for method {s.method} (how many points to evaluate)")
    elif s.points > MAX_POINTS:
        problems.append(f"search.points: {s.points:,} is more than the limit of {MAX_POINTS:,} points")
    if s.method == "optuna" and not s.objectives:
        problems.append("search.objectives: required for method optuna, e.g. {throughput_samples_per_s: max, "
                        "area_mm2: min}")
    space = math.prod(p.count() for p in params)
    if s.method == "random" and s.points is not None and space < s.points:
        problems.append(f"search.points: {s.points} distinct points asked of a space of {space:,} combinations; "
                        f"ask at most {space:,}, or use method: grid")
    return problems


def _hw_detail(e: HwConfigError) -> str:
    """A hardware loader's message without its `hardware: N problem(s)` header, on one line."""
    lines = str(e).removeprefix(f"{_HW_WHERE}: ").splitlines()
    if len(lines) > 1 and lines[0].endswith("problem(s)"):
        lines = lines[1:]
    return "; ".join(line.strip() for line in lines)


def _hw_refusal(base: dict[str, Any], overrides: dict[str, Any]) -> str | None:
    try:
        parse_hw(apply_overrides(base, overrides, _HW_WHERE), _HW_WHERE)
    except HwConfigError as e:
        return _hw_detail(e)
    return None


def _model_refusal(spec: SweepSpec, name: str, value: Any) -> str | None:
    try:
        models.build(spec.model, **{**spec.model_options, name: value})
    except AccelsimError as e:
        return str(e)
    return None


def _option_refusal(spec: SweepSpec, name: str, value: Any) -> str | None:
    try:
        RunOptions.model_validate({**spec.options.model_dump(), name: value})
    except ValidationError as e:
        return "; ".join(describe_errors(e.errors()))
    return None


def _probe_values(p: Parameter) -> list[Any]:
    """The values to try a parameter with: each listed one, or a range's two ends."""
    if p.values is not None:
        return list(p.values)
    ends = [p.range.low, p.range.high]
    return [int(v) for v in ends] if p.range.integer else [float(v) for v in ends]


def _parameter_problems(spec: SweepSpec, params: list[Parameter], base: HwSpec | None, model_ok: bool) -> list[str]:
    """Every parameter's name known and each of its values accepted; a parameter is reported once,
    at its first refused value. `base` None, `model_ok` False: the hardware (with hw_set) or the model
    (with model_options) is already reported, so their parameters' values are not tried."""
    problems = []
    option_names = [k for k in RunOptions.model_fields if k not in RESULT_OPTIONS]
    model_names = list(models.options(spec.model)) if spec.model in models.names() else None
    base_data = base.model_dump(mode="json") if base is not None else None
    total = sum(len(p.values) for p in params if p.values is not None)
    if total > MAX_TOTAL_VALUES:
        return [f"parameters: {total:,} values listed in all, more than the limit of {MAX_TOTAL_VALUES:,}"]
    for p in params:
        where = f"parameters.{p.key}"
        if p.kind != "hw" and TIE in p.name:
            problems.append(f"{where}: only hardware key paths can be tied with commas; give each {p.kind} "
                            f"option its own parameter")
            continue
        if p.kind == "option" and p.name in RESULT_OPTIONS:
            problems.append(f"{where}: {p.name} decides which metrics are recorded; set it in options, not as a "
                            f"parameter")
            continue
        if p.kind == "option" and p.name not in option_names:
            problems.append(f"{where}: unknown step option {_shown(p.name)}; options: {', '.join(option_names)}")
            continue
        if p.kind == "model" and model_names is not None and p.name not in model_names:
            problems.append(f"{where}: model {spec.model!r} has no option {_shown(p.name)}; its options are: "
                            f"{', '.join(model_names)}")
            continue
        if p.kind == "hw" and (len(set(p.paths)) != len(p.paths) or not all(p.paths)):
            problems.append(f"{where}: a tied parameter names each hardware path once, none empty "
                            f"(got {', '.join(map(repr, p.paths))})")
            continue
        if (p.kind == "model" and not model_ok) or (p.kind == "hw" and base_data is None):
            continue
        for value in _probe_values(p):
            if p.kind == "hw":
                refusal = _hw_refusal(base_data, {**spec.hw_set, **dict.fromkeys(p.paths, value)})
            elif p.kind == "model":
                refusal = _model_refusal(spec, p.name, value)
            else:
                refusal = _option_refusal(spec, p.name, value)
            if refusal is not None:
                problems.append(f"{where}: value {_shown(value)} is refused: {refusal}")
                break
    return problems


def _model_problems(spec: SweepSpec) -> list[str]:
    """The model and its fixed options, before any parameter."""
    if spec.model not in models.names():
        return [f"model: unknown model {_shown(spec.model)}; available models: {', '.join(models.names())}"]
    try:
        models.build(spec.model, **spec.model_options)
    except AccelsimError as e:
        return [f"model_options: {e}"]
    return []


def _hw_set_problems(spec: SweepSpec, base: HwSpec | None) -> list[str]:
    """The hardware with hw_set, before any parameter."""
    refusal = _hw_refusal(base.model_dump(mode="json"), dict(spec.hw_set)) if base is not None and spec.hw_set \
        else None
    return [] if refusal is None else [f"hw_set: {refusal}"]


def check_spec(spec: SweepSpec, base: HwSpec | None) -> list[str]:
    """Every problem of a schema-valid spec (`base`: its hardware, None when that did not load). The
    cheap rules come first; values are tried only when the number of points is within bounds, so a
    10**9-point grid is refused at once."""
    params = parameters(spec)
    problems = _metric_problems(spec) + _search_problems(spec, params)
    if any(line.startswith(("parameters:", "search.points:")) for line in problems):
        return problems
    model_problems, hw_problems = _model_problems(spec), _hw_set_problems(spec, base)
    usable_hw = base if not hw_problems else None
    return (problems + model_problems + hw_problems
            + _parameter_problems(spec, params, usable_hw, model_ok=not model_problems))
