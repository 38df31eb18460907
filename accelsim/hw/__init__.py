"""Hardware descriptions: YAML -> HwSpec (pydantic)."""
from accelsim.hw.load import load_hw, parse_hw
from accelsim.hw.spec import RANGES, Buffer, Chip, HwSpec, Interconnect, Memory, Unit

__all__ = ["RANGES", "Buffer", "Chip", "HwSpec", "Interconnect", "Memory", "Unit", "load_hw", "parse_hw"]
