"""The fused loop: `make_train(config) -> TrainFns(init, run_chunk, evaluate)`, its
state types, and loop extensions (`Extension`, the library's in `loop.extensions`)."""

from jaxrl_fast.loop.extension import Extension, Hooks
from jaxrl_fast.loop.loop import TrainFns, make_train
from jaxrl_fast.loop.parts import LoopParts
from jaxrl_fast.loop.state import (
    ChunkMetrics,
    RunnerState,
    SeedState,
    StepStats,
    example_transition,
)

__all__ = [
    "ChunkMetrics",
    "Extension",
    "Hooks",
    "LoopParts",
    "RunnerState",
    "SeedState",
    "StepStats",
    "TrainFns",
    "example_transition",
    "make_train",
]
