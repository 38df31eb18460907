"""Design-space sweeps: a spec (hardware, model, step options, parameters to vary) -> a results table of
one compiled, simulated point per row, run locally or on Dask, saved as it goes (results.parquet).

    import accelsim as A
    df = A.sweep("experiments/sweeps/tpu_array.yaml", out="sweeps/tpu_array", workers=4)

pandas, pyarrow and optuna (extra `sweep`) and dask (extra `dask`) are imported only when a sweep runs.
"""
from accelsim.dse.evaluate import compile_point, evaluate_point
from accelsim.dse.load import load_spec
from accelsim.dse.metrics import METRICS
from accelsim.dse.runner import SweepRun, run_sweep, sweep
from accelsim.dse.spec import SweepSpec

__all__ = ["METRICS", "SweepRun", "SweepSpec", "compile_point", "evaluate_point", "load_spec", "run_sweep", "sweep"]
