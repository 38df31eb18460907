"""The CLI's flags for the step options: one flag per StepOptions field, from one table, so a flag cannot
drift from the option it sets (tests/test_step_options.py checks that every field has its flag). The help
texts are the fields' descriptions; a field whose values need a parser names it here."""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from typing import Any

from accelsim.cli.common import exact_seconds_arg, positive_int, remat_arg
from accelsim.compiler.exact import MAX_EXACT_TASKS
from accelsim.schedule.options import (DEFAULT_EXACT_SECONDS, EFFORTS, GRADIENT_REDUCTIONS, GRANULARITIES,
                                       PIPELINE_SCHEDULES, SPLIT_WORDS, STEP_PRECISIONS, ZERO_STAGES, StepOptions)



@dataclass(frozen=True)
class Flag:
    """How one step option is spelled on the command line: argparse's arguments besides the flag's name,
    and `help_extra`, what the flag adds to the field's description."""

    kwargs: dict[str, Any] = field(default_factory=dict)
    help_extra: str = ""


def _remat_syntax() -> str:
    from accelsim.remat.policy import SYNTAX

    return SYNTAX


FLAGS: dict[str, Flag] = {
    "microbatches": Flag({"type": positive_int, "default": 1, "metavar": "M"}, "default 1"),
    "data_parallel": Flag({"type": positive_int, "default": 1, "metavar": "D"},
                          "default 1; with no stages, ranks or ZeRO, replicas beyond the chips share them (the "
                          "output says so)"),
    "pipeline_stages": Flag({"type": positive_int, "default": 1, "metavar": "P"}, "default 1"),
    "max_in_flight": Flag({"type": positive_int, "default": None, "metavar": "N"},
                          "default: as many as fit the fastest memory, several widths tried"),
    "split": Flag({"choices": tuple(SPLIT_WORDS), "default": "auto"},
                  "matmuls and convolutions: 'on', 'off', or 'auto' (default): schedule the step both ways and "
                  "keep the shorter"),
    "tensor_parallel": Flag({"type": positive_int, "default": 1, "metavar": "T"},
                            "the model is built Megatron-LM's way over T ranks (gpt2, transformer_block, "
                            "resnet_block; default 1); D x P x T must fit the hardware's chips"),
    "zero": Flag({"type": int, "choices": ZERO_STAGES, "default": 0}, "default 0; each replica on its own chip"),
    "remat": Flag({"type": remat_arg, "metavar": "POLICY"},
                  "training steps only; e.g. sqrt, every:2, full:1, budget:64MiB; recorded in the schedule"),
    "exact": Flag({"nargs": "?", "const": DEFAULT_EXACT_SECONDS, "type": exact_seconds_arg, "metavar": "SECONDS"},
                  f"OR-Tools CP-SAT (pip install accelsim[exact]) seeded with the list schedule, in CP-SAT's "
                  f"deterministic seconds (a bare --exact: {DEFAULT_EXACT_SECONDS:g}; reproducible, often 2-7x "
                  f"that in wall time); prints the proved bound and gap; steps above {MAX_EXACT_TASKS:,} tasks are "
                  f"refused"),
    "pipeline_schedule": Flag({"choices": PIPELINE_SCHEDULES, "default": None},
                              "default: the list scheduler's order at task granularity, 1f1b at stage granularity"),
    "virtual_stages": Flag({"type": positive_int, "default": 1, "metavar": "V"},
                           "default 1; the interleaved schedule needs V >= 2"),
    "granularity": Flag({"choices": GRANULARITIES, "default": "auto"}, "default auto"),
    "effort": Flag({"choices": EFFORTS, "default": "default"}, "default 'default'"),
    "stage_layers": Flag({"default": None, "metavar": "N,N,..."}, "e.g. 5,5,6,6: one count per stage"),
    "stage_boundaries": Flag({"default": None, "metavar": "NAME,..."},
                             "e.g. h4,h8: one layer name per stage after the first"),
    "precision": Flag({"choices": STEP_PRECISIONS, "default": None},
                      "default: as the hardware file says; a unit without a peak for it is refused"),
    "mapping": Flag({"default": None, "metavar": "FILE"},
                    "YAML or JSON by layer name and unit, as --mapping-out writes it; a layer given only "
                    "`dataflow: ws` keeps that dataflow and searches the rest; units need `mapping: search`"),
    "fusion": Flag({"default": "off", "metavar": "off|auto|T"},
                   "default off; the fused layers' nodes are named 'layer[tile t/T]' in the per-layer table"),
    "fusion_chains": Flag({"default": None, "metavar": "ID:T,..."},
                          "with --fusion auto: fuse exactly these chains (the id of a chain's first layer, its tile "
                          "count), as a schedule of auto records them; default: auto chooses"),
    "gradient_reduction": Flag({"choices": GRADIENT_REDUCTIONS, "default": "overlap"},
                               "default overlap; with one replica there is nothing to reduce"),
}
PARALLEL = ("microbatches", "data_parallel", "pipeline_stages", "max_in_flight", "tensor_parallel", "zero", "split",
            "pipeline_schedule", "virtual_stages", "granularity", "effort", "stage_layers", "stage_boundaries",
            "precision", "fusion", "fusion_chains", "gradient_reduction")
"""The flags of every command that compiles a step; `remat` and `exact` go with the commands that build and
solve the whole step (run, compile, check)."""


def flag_name(option: str) -> str:
    return "--" + option.replace("_", "-")


_PYTHON_DEFAULT = re.compile(r"\s*\(None: ([^()]*)\)")
"""A field description's "(None: ...)": what the Python default means, in Python's words."""


def flag_help(name: str) -> str:
    """The help text of option `name`'s flag: its field's description, then what the flag adds. The
    description's "(None: X)" says "default: X" instead, or goes where the flag states its own default."""
    spec = FLAGS[name]
    description = StepOptions.model_fields[name].description or ""
    syntax = name == "remat" and _remat_syntax() not in description  # the policies, once
    extra = f"{_remat_syntax()}; {spec.help_extra}" if syntax else spec.help_extra
    match = _PYTHON_DEFAULT.search(description)
    if match and "default" in extra:
        description = description[:match.start()] + description[match.end():]
    elif match and match.end() == len(description):  # closing: one parenthesis with the flag's words
        description = description[:match.start()]
        extra = f"default: {match.group(1)}; {extra}" if extra else f"default: {match.group(1)}"
    elif match:
        description = f"{description[:match.start()]} (default: {match.group(1)}){description[match.end():]}"
    return f"{description} ({extra})" if extra else description


def add_step_flags(p: argparse.ArgumentParser, options: tuple[str, ...] = PARALLEL) -> None:
    """Add the flags of `options` (StepOptions field names) to `p`."""
    for name in options:
        spec = FLAGS[name]
        text = flag_help(name).replace("%", "%%")  # argparse formats help
        p.add_argument(flag_name(name), dest=name, help=text,
                       **spec.kwargs)


def step_options(args: argparse.Namespace) -> StepOptions:
    """The StepOptions the parsed flags say (a flag the command lacks keeps its default)."""
    given: dict[str, Any] = {name: getattr(args, name) for name in FLAGS if hasattr(args, name)}
    if given.get("split") in SPLIT_WORDS:
        given["split"] = SPLIT_WORDS[given["split"]]
    return StepOptions.of(**given)


