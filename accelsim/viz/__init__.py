"""Plots (matplotlib, Agg) and traces: each function returns a Figure (or the trace dict) and can save it."""
from accelsim.viz.perfetto import write_perfetto
from accelsim.viz.pipeline import plot_pipeline, schedule_spans
from accelsim.viz.roofline import plot_roofline
from accelsim.viz.timeline import plot_memory, plot_timeline, plot_utilization

__all__ = ["plot_memory", "plot_pipeline", "plot_roofline", "plot_timeline", "plot_utilization", "schedule_spans",
           "write_perfetto"]
