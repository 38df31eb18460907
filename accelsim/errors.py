"""One small tree of user-facing errors; the CLI prints their message and exits 1."""


class AccelsimError(Exception):
    """Base of every error a user can cause (bad model, option, shape, file)."""


class ShapeError(AccelsimError):
    """A node was built with inputs whose shapes or dtypes the op cannot accept."""


class GraphError(AccelsimError):
    """A graph is malformed or asked for something it does not have."""


class ModelError(AccelsimError):
    """Unknown model name or bad model option."""


class HwConfigError(AccelsimError):
    """A hardware description file is missing, malformed or inconsistent."""


class MappingError(AccelsimError):
    """A graph node that no functional unit of the hardware can execute."""


class ScheduleError(AccelsimError):
    """A schedule cannot be built (bad options, memory does not fit) or fails validation."""


class MemoryFitError(ScheduleError):
    """A step's tensors do not fit the hardware's memories (compile retries with fewer in flight)."""


class SweepError(AccelsimError):
    """A sweep specification is malformed, or a sweep cannot run (missing extra, unreachable cluster)."""


class FrontendError(AccelsimError):
    """A model or graph file cannot be imported: an op accelsim has no entry for, a tampered graph file, a
    missing optional dependency (torch, onnx)."""
