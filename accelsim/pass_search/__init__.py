"""The search over graph passes scored by compiled makespan (`optimize(graph, "auto", hw=...)`). It compiles
schedules, so it stands above the compiler, while the rule-based passes (accelsim.passes) stand below it."""
from accelsim.pass_search.auto import SearchLog, SearchOptions
from accelsim.pass_search.optimize import optimize, optimize_with_log

__all__ = ["SearchLog", "SearchOptions", "optimize", "optimize_with_log"]
