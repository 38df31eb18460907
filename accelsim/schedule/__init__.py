"""The schedule contract: `Schedule` (plain data, JSON), its task kinds, split parts, validation and the machine
rules (memory levels, ports, traffic, collectives) that every reader of a schedule shares. How a schedule is
made lives in accelsim.compiler; readers (sim, execute, viz, metrics, report) import only this package."""
from accelsim.schedule.plan import Schedule

__all__ = ["Schedule"]
