"""Static scheduling: Graph x HwSpec -> Schedule (plain data, JSON)."""
from accelsim.schedule.compile import compile
from accelsim.schedule.plan import Schedule

__all__ = ["Schedule", "compile"]
