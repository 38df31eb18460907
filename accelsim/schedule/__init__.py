"""Static scheduling: Graph x HwSpec -> Schedule (plain data, JSON); schedule_dag for abstract DAGs."""
from accelsim.schedule.compile import compile
from accelsim.schedule.dag import schedule_dag, validate_dag_problem
from accelsim.schedule.plan import Schedule

__all__ = ["Schedule", "compile", "schedule_dag", "validate_dag_problem"]
