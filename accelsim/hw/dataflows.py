"""A unit's mapping keys: `dataflows:`, the dataflows its array may run a layer in, for the mapper to choose
from (accelsim/mapping/; absent, the array's one `array.dataflow`), and `mapping:`, whether the scheduler
costs its nodes by the fixed im2col mapping (`fixed`, the default: every result as before the keys
existed) or by the mapper's best mapping (`search`).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, WithJsonSchema

DATAFLOW_WORDS = ("os", "ws", "is")  # the words cost/systolic.py times (its DATAFLOWS); hw/ sits left of cost/
MAX_DATAFLOWS = len(DATAFLOW_WORDS)
MappingChoice = Literal["fixed", "search"]


def check_dataflows(value: Any) -> tuple[str, ...]:
    """A non-empty list of distinct known dataflow words, in the order given (the mapper's tie order)."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ValueError(f"expected a list of dataflows drawn from {', '.join(DATAFLOW_WORDS)} (e.g. [ws, os]), "
                         f"got {value!r}")
    if not value:
        raise ValueError(f"an empty list allows no dataflow at all; list one or more of {', '.join(DATAFLOW_WORDS)}, "
                         f"or leave the key out to keep the array's one `dataflow`")
    unknown = [w for w in value if w not in DATAFLOW_WORDS]
    if unknown:
        shown = ", ".join(repr(w) if len(repr(w)) <= 20 else repr(w)[:17] + "..." for w in unknown[:4])
        raise ValueError(f"unknown dataflow {shown}; expected each of os (outputs stay in the PEs), ws "
                         f"(weights stay) or is (inputs stay)")
    repeated = sorted({w for w in value if list(value).count(w) > 1})
    if repeated:
        raise ValueError(f"{', '.join(repeated)} listed more than once in {list(value)}; list each dataflow once")
    return tuple(value)


Dataflows = Annotated[tuple[str, ...], BeforeValidator(check_dataflows), WithJsonSchema(
    {"type": "array", "items": {"enum": list(DATAFLOW_WORDS)}, "minItems": 1, "maxItems": MAX_DATAFLOWS,
     "uniqueItems": True,
     "description": "dataflows the mapper may choose for this array unit, e.g. [ws, os]; leave out for the "
                    "array's one `dataflow`"})]


def dataflows_problems(name: str, dataflows: tuple[str, ...] | None, array_dataflow: str | None,
                       mapping: str = "fixed") -> list[tuple]:
    """Cross-field problems (hw/ranges.Problem tuples): `dataflows` and `mapping: search` need an array, and
    `dataflows` must include the array's own `dataflow`, so that today's mapping stays one point of the
    mapper's space."""
    if mapping != "fixed" and array_dataflow is None:
        return [(("mapping",), f"unit {name!r}: mapping {mapping!r} searches how a systolic array runs each layer; "
                 f"give the unit an `array` or drop the key", mapping)]
    if dataflows is None:
        return []
    if array_dataflow is None:
        return [(("dataflows",), f"unit {name!r}: dataflows lists what a systolic array may run; give the unit an "
                 f"`array` or drop dataflows", list(dataflows))]
    if array_dataflow not in dataflows:
        return [(("dataflows",), f"unit {name!r}: dataflows {list(dataflows)} leaves out the array's own dataflow "
                 f"{array_dataflow!r}; include it (the unit's default mapping runs in it)", list(dataflows))]
    return []
