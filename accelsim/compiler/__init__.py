"""How a Schedule is made (Graph, HwSpec, step options -> Schedule): planning expands the step into tasks
(planning/), timing list-schedules them and places memory (timing/), exact mode solves small steps optimally
(exact.py, exact_step.py), and verify.py checks that a schedule is exactly a timing of its plan.
`schedule_dag` runs the same list scheduler on an abstract task DAG."""
from accelsim.compiler.compile import compile
from accelsim.compiler.dag import schedule_dag, validate_dag_problem

__all__ = ["compile", "schedule_dag", "validate_dag_problem"]
