"""Plots (matplotlib, Agg backend): each function returns a Figure and can save it."""
from accelsim.viz.roofline import plot_roofline

__all__ = ["plot_roofline"]
