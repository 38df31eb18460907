"""Mapping: how one layer runs on one array unit (spatial unrolling, stream tiles, fold-loop order,
dataflow), its cost, and a mapper that searches for the best one. See DESIGN.md's vocabulary."""
