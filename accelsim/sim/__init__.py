"""SimPy simulation of schedules (Schedule, HwSpec -> Result)."""
from accelsim.sim.engine import MODES, SimulationError, simulate
from accelsim.sim.trace import Channel, MemoryTrace, Result, Span

__all__ = ["MODES", "Channel", "MemoryTrace", "Result", "SimulationError", "Span", "simulate"]
