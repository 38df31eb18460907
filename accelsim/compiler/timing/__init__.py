"""Timing: a Plan -> timed tasks and placed tensors: priority rules, the list scheduler with its memory
arenas, the search over list schedules, symmetric copies, and lower bounds."""
