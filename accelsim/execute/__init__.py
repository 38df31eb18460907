"""Execute compiled schedules on real numbers and check them against the numpy reference."""
from accelsim.execute.check import CheckReport, check
from accelsim.execute.run import execute

__all__ = ["CheckReport", "check", "execute"]
