"""Hardware descriptions: YAML -> HwSpec (pydantic)."""
from accelsim.hw.load import load_hw, parse_hw
from accelsim.hw.spec import Buffer, Chip, HwSpec, Interconnect, Link, Memory, Unit

__all__ = ["Buffer", "Chip", "HwSpec", "Interconnect", "Link", "Memory", "Unit", "load_hw", "parse_hw"]
