"""Stage granularity: a step compiled as a pipeline of stage templates instead of task by task.

Each stage's work for one micro-batch (forward, backward with recomputation; its tensor-parallel ranks
and their collectives inside) is compiled once by the fine-grained machinery (templates.py); a pipeline
schedule (schedules.py: GPipe, 1F1B, interleaved 1F1B, ZB-H1) orders that work on every stage, and an
event simulation over stage-level work (compose.py) times the step: bubbles, point-to-point activation
transfers, data-parallel gradient buckets and link contention are simulated, not taken from a formula.
work.py is the record the three share. A model whose layers repeat (gpt2's blocks) is measured from a few of
them, one chunk of each kind, and never built whole (layer_templates.py).
"""
