"""SimPy simulation of schedules (Schedule -> Result)."""
from accelsim.sim.engine import MODES, SimulationError, simulate
from accelsim.sim.trace import Result, Span

__all__ = ["MODES", "Result", "SimulationError", "Span", "simulate"]
