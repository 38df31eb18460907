"""Planning: a graph, hardware and step options -> the task DAG of one step (Plan): stages, split decisions,
chip map, tensor-parallel rank twins and ZeRO's sharding; no times yet."""
