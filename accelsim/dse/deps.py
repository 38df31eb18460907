"""The sweep's optional dependencies (extras `sweep`: pandas, pyarrow, optuna; `dask`: dask[distributed]),
imported when needed; a missing one is a SweepError naming the extra to install."""
from __future__ import annotations

import importlib
from types import ModuleType

from accelsim.errors import SweepError


def require(module: str, extra: str) -> ModuleType:
    """Import `module`, or say which extra of accelsim installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        top = module.split(".")[0]
        raise SweepError(f"accelsim sweep needs {top}, which is not installed or cannot be imported ({e}); "
                         f"install it with: pip install 'accelsim[{extra}]'") from None
