"""Pipeline schedules: for p stages, v virtual stages and M micro-batches, the order in which every pipeline
chip runs its forward, backward and weight-gradient work items (p, v, M -> one tuple of Items per chip).

Chip s runs model chunks s, s + p, s + 2p, ... (work.py). A schedule only orders work; compose.py times it.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import ClassVar

from accelsim.errors import ScheduleError

ITEM_KINDS: tuple[str, ...] = ("forward", "backward", "weight_grad")

MAX_ITEMS = 50_000_000
"""The most work items one order may hold (3 * p * v * M at most): a few GiB of tuples; GPT-3 175B's
1,024-chip step (p=16, v=3, M=192) has about 18,000."""


@dataclass(frozen=True, slots=True)
class Item:
    """One unit of stage-level work: a chunk's forward, backward or deferred weight-gradient pass for one
    micro-batch."""

    kind: str
    """forward, backward (the whole backward, or only the input gradient where the schedule defers W) or
    weight_grad (ZB-H1's deferred W pass)."""
    microbatch: int
    chunk: int
    """Position in the forward order, 0 .. p*v - 1; it runs on chip chunk % p."""


Order = tuple[tuple[Item, ...], ...]
"""One tuple of items per pipeline chip, chip 0 first, each in the order the chip runs them."""


def _is_count(value: object) -> bool:
    """A Python or numpy integer, never bool (True is not a count)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class PipelineSchedule:
    """One pipeline schedule: how each chip orders its items. Subclasses set the class fields and
    `_chip_order`; `order` checks the arguments once for all of them."""

    name: ClassVar[str]
    splits_weight_grad: ClassVar[bool] = False
    """True where "backward" is only the input gradient and a separate weight_grad item follows it."""
    needs_virtual_stages: ClassVar[bool] = False
    """True for schedules that need v >= 2 model chunks per chip; the others need v == 1."""

    def order(self, p: int, v: int, M: int) -> Order:
        """Every chip's items in the order it runs them, for p stages, v chunks per chip, M micro-batches."""
        self.check(p, v, M)
        return tuple(tuple(self._chip_order(s, p, v, M)) for s in range(p))

    def in_flight(self, p: int, v: int, M: int) -> int:
        """The most (micro-batch, chunk) activations any chip stashes at once: held from a chunk's forward
        until its last backward item (its weight_grad where the schedule splits one off). With v = 1 that is
        micro-batches; with v chunks per chip each is about 1/v of a stage's activations."""
        return max(stash_counts(self.order(p, v, M)))

    def window(self, p: int, v: int, M: int) -> int:
        """The micro-batches a task-level step keeps in flight to follow this order (compile.py's
        max_in_flight, under which micro-batch k + w starts only after every task of micro-batch k): the stash,
        in_flight, where the order itself finishes micro-batch k on every chip before the first chip starts
        micro-batch k + in_flight (GPipe, 1F1B, interleaved)."""
        return self.in_flight(p, v, M)

    def check(self, p: int, v: int, M: int) -> None:
        """ScheduleError unless p, v and M are counts this schedule can order."""
        for key, value in (("pipeline stages p", p), ("virtual stages v", v), ("micro-batches M", M)):
            if not _is_count(value) or value < 1:
                raise ScheduleError(f"pipeline schedule {self.name!r}: {key} must be a positive integer, got "
                                    f"{value!r}")
        if self.needs_virtual_stages and v < 2:
            raise ScheduleError(f"pipeline schedule {self.name!r} needs virtual_stages >= 2 (model chunks per "
                                f"pipeline chip), got {v}; use '1f1b' for one chunk per chip")
        if not self.needs_virtual_stages and v != 1:
            raise ScheduleError(f"pipeline schedule {self.name!r} runs one model chunk per pipeline chip, so "
                                f"virtual_stages must be 1, got {v}; use 'interleaved' for several chunks per chip")
        items = len(ITEM_KINDS if self.splits_weight_grad else ITEM_KINDS[:2]) * p * v * M
        if items > MAX_ITEMS:
            raise ScheduleError(f"pipeline schedule {self.name!r} with p={p}, v={v}, M={M} would order {items:,} "
                                f"work items, above the limit of {MAX_ITEMS:,}; use fewer micro-batches or stages")

    def _chip_order(self, s: int, p: int, v: int, M: int) -> list[Item]:
        raise NotImplementedError


class GPipe(PipelineSchedule):
    """GPipe (Huang et al., 2019): every micro-batch's forward, then every backward, in micro-batch order.
    Stashes all M micro-batches."""

    name = "gpipe"

    def _chip_order(self, s: int, p: int, v: int, M: int) -> list[Item]:
        return [Item("forward", m, s) for m in range(M)] + [Item("backward", m, s) for m in range(M)]


class OneFOneB(PipelineSchedule):
    """1F1B, PipeDream-Flush (Narayanan et al., 2021): chip s runs p - s - 1 warm-up forwards, then
    alternates one forward and one backward, then drains the remaining backwards. Stashes at most p - s."""

    name = "1f1b"

    def _chip_order(self, s: int, p: int, v: int, M: int) -> list[Item]:
        warmup = min(p - s - 1, M)
        items = [Item("forward", m, s) for m in range(warmup)]
        for i in range(M - warmup):
            items += [Item("forward", warmup + i, s), Item("backward", i, s)]
        items += [Item("backward", m, s) for m in range(M - warmup, M)]
        return items


class Interleaved(PipelineSchedule):
    """Interleaved 1F1B (Narayanan et al., SC21, section 2.2.2): each chip holds v chunks and runs
    micro-batches in groups of p through its chunks in turn; warm-up of (p - s - 1) * 2 + (v - 1) * p
    chunk-forwards (all of them when M == p), then one forward and one backward alternately, then the
    remaining backwards. Needs M a multiple of p and v >= 2."""

    name = "interleaved"
    needs_virtual_stages = True

    def check(self, p: int, v: int, M: int) -> None:
        super().check(p, v, M)
        if M % p:
            raise ScheduleError(f"pipeline schedule 'interleaved' needs the micro-batches M to be a multiple of the "
                                f"pipeline stages p, got M={M} and p={p}; use M={(M // p + 1) * p} or '1f1b'")

    def _chip_order(self, s: int, p: int, v: int, M: int) -> list[Item]:
        total = M * v

        def nth(k: int, kind: str) -> Item:
            """The chip's k-th forward (or backward) item: micro-batches in groups of p, each group through
            the chip's chunks in forward order (backward: reverse chunk order)."""
            local = (k % (p * v)) // p
            if kind == "backward":
                local = v - 1 - local
            return Item(kind, (k // (p * v)) * p + k % p, local * p + s)

        warmup = total if M == p else min((p - s - 1) * 2 + (v - 1) * p, total)
        items = [nth(k, "forward") for k in range(warmup)]
        for i in range(total - warmup):
            items += [nth(warmup + i, "forward"), nth(i, "backward")]
        items += [nth(k, "backward") for k in range(total - warmup, total)]
        return items


class ZeroBubbleH1(PipelineSchedule):
    """ZB-H1 (Qi et al., ICLR 2024, section 3.1): the backward pass split into B (input gradient, on the
    critical path) and W (weight gradient, deferred). In the steady state chip s runs the triple
    F(x), B(x - (p - 1 - s)), W(x - (p - 1)) for x = 0 .. M + p - 2, skipping indices outside 0 .. M - 1:
    1F1B's warm-up, W passes filling the cool-down's bubbles, and at most p micro-batches stashed on any
    chip, as in 1F1B."""

    name = "zb-h1"
    splits_weight_grad = True

    def window(self, p: int, v: int, M: int) -> int:
        """All M: the last chip defers micro-batch k's W pass until after micro-batch k + p - 1's B pass, and no
        item of the first chip waits for it, so a window of in_flight (p) micro-batches would hold the first
        chip's forward passes back for W passes the order runs later (transformer_block p=2 M=8 on a100_x8:
        179,622 cycles with a window of 2, 153,101 with 3 or 8, against 1F1B's 152,432); the order alone
        keeps each chip's stash within in_flight."""
        return M

    def _chip_order(self, s: int, p: int, v: int, M: int) -> list[Item]:
        items: list[Item] = []
        for x in range(M + p - 1):
            for kind, m in (("forward", x), ("backward", x - (p - 1 - s)), ("weight_grad", x - (p - 1))):
                if 0 <= m < M:
                    items.append(Item(kind, m, s))
        return items


PIPELINE_SCHEDULES: dict[str, PipelineSchedule] = {
    cls.name: cls() for cls in (GPipe, OneFOneB, Interleaved, ZeroBubbleH1)
}
"""Every pipeline schedule by its name (StepOptions.pipeline_schedule's values)."""


def pipeline_schedule(name: str) -> PipelineSchedule:
    """The schedule called `name`; ScheduleError naming the known ones otherwise."""
    if not isinstance(name, str) or name not in PIPELINE_SCHEDULES:
        raise ScheduleError(f"unknown pipeline schedule {name!r}; expected one of "
                            f"{', '.join(PIPELINE_SCHEDULES)}")
    return PIPELINE_SCHEDULES[name]


def windowed_order(schedule: PipelineSchedule, p: int, v: int, M: int, window: int | None) -> Order:
    """The schedule's order of M micro-batches when at most `window` may be in flight (None: no limit): as is
    when the schedule stashes no more than that, else in rounds of `window` micro-batches (the last one
    smaller), each round the schedule's own order of its micro-batches, one after the other. A task-level
    step whose activations do not fit halves its window (compile.py); GPipe's order of all M micro-batches
    then contradicts the window (its backward passes wait for forward passes the window holds back)."""
    if window is None or window >= M or schedule.in_flight(p, v, M) <= window:
        return schedule.order(p, v, M)
    rounds = [[] for _ in range(p)]
    for first in range(0, M, window):
        for chip, items in enumerate(schedule.order(p, v, min(window, M - first))):
            rounds[chip] += [Item(it.kind, it.microbatch + first, it.chunk) for it in items]
    return tuple(tuple(items) for items in rounds)


def stash_counts(order: Order) -> tuple[int, ...]:
    """Per chip, the most (micro-batch, chunk) activations held at once: from a forward item until the last
    backward item of the same (micro-batch, chunk) on that chip (its weight_grad where there is one)."""
    counts = []
    for items in order:
        last = {(it.microbatch, it.chunk): i for i, it in enumerate(items) if it.kind != "forward"}
        held = peak = 0
        for i, it in enumerate(items):
            if it.kind == "forward":
                held += 1
                peak = max(peak, held)
            elif last[(it.microbatch, it.chunk)] == i:
                held -= 1
        counts.append(peak)
    return tuple(counts)
