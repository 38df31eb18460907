"""The hardware a schedule was compiled for, found from the schedule alone: a bundled config by name (with
the overrides it records), or the whole description the schedule carries when its hardware is a user's own
file. So `accelsim simulate s.json` and `A.simulate(schedule)` need no --hw, even after the file is gone."""
from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from accelsim.errors import AccelsimError, HwConfigError
from accelsim.hw.load import bundled_names, bundled_path, load_hw
from accelsim.hw.spec import HwSpec
from accelsim.schedule.plan import Schedule, hw_hash


@lru_cache(maxsize=64)
def _bundled_hash(name: str, overrides_json: str) -> str | None:
    """The hash of bundled config `name` with `overrides` applied; None where that does not load."""
    if name not in bundled_names():
        return None
    try:
        return hw_hash(load_hw(bundled_path(name), overrides=json.loads(overrides_json) or None))
    except AccelsimError:
        return None


def carried_spec(hw: HwSpec) -> dict[str, Any] | None:
    """What a schedule compiled for `hw` carries: None when the bundled config of the same name, with the
    same overrides, is this hardware (the name rebuilds it); else the whole description as JSON data."""
    overrides = json.dumps(hw.overrides, sort_keys=True, default=str)
    if _bundled_hash(hw.name, overrides) == hw_hash(hw):
        return None
    return json.loads(hw.model_dump_json())


def hardware_of(schedule: Schedule) -> HwSpec:
    """The hardware `schedule` names: its carried description, or the bundled config with its overrides.
    (Validation against hw_hash follows wherever the schedule is replayed, so an edited description is
    refused there.)"""
    if schedule.hw_spec is not None:
        try:
            return load_hw(schedule.hw_spec)
        except HwConfigError as e:
            raise HwConfigError(f"the hardware description the schedule carries ({schedule.hw_name!r}) is invalid: "
                                f"{e}") from None
    if schedule.hw_name not in bundled_names():
        raise HwConfigError(f"the schedule was compiled for hardware {schedule.hw_name!r}, which is not a bundled "
                            "config, and it does not carry the description (an older accelsim wrote it): pass the "
                            "hardware file (--hw FILE, or hw= in Python)")
    return load_hw(bundled_path(schedule.hw_name), overrides=schedule.hw_overrides)
