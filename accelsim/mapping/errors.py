"""The mapping stage's user-facing error."""
from __future__ import annotations

from accelsim.errors import AccelsimError


class MappingSpecError(AccelsimError):
    """A mapping that does not fit its layer or unit (unknown dimension, factors that do not divide or
    cover a dimension, a dataflow the unit does not allow), or a mapper asked for something it cannot do."""
