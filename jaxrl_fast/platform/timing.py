"""What a training call reports about its time: `Timed`, the part every result shares.

The fused loop's `TrainResult` (`run.result`) and the conventional loop's `BaselineResult`
(`baseline.run`) are both a `Timed`: the env steps, and the wall clock split the same way into
compile, run (the loop itself, compile excluded) and final evaluation. So a benchmark that
compares the two reads the same fields with the same meaning, and the rates derive in one place.
"""

from __future__ import annotations

import dataclasses
import math

__all__ = ["Timed"]


@dataclasses.dataclass(kw_only=True)
class Timed:
    """The times of one training call.

    Attributes:
      env_steps: env steps per seed at the end (prefill included).
      compile_time_s: seconds the call waited on compilation.
      run_time_s: seconds of the training loop (env reset, prefill and updates), compile
        excluded.
      eval_time_s: seconds waiting on the final evaluation after the loop.
      wall_time_s: the whole call.
      resumed_env_steps: env steps per seed already done when the call resumed a run (0: it
        started it); the rates count only the steps this call ran.
    """

    env_steps: int
    compile_time_s: float
    run_time_s: float
    eval_time_s: float
    wall_time_s: float
    resumed_env_steps: int = 0

    @property
    def lanes(self) -> int:
        """Independent learners the call stepped at once (seeds x data replicas; 1 here)."""
        return 1

    @property
    def env_steps_run(self) -> int:
        """Env steps per seed that this call ran (after a resume: since the checkpoint)."""
        return self.env_steps - self.resumed_env_steps

    @property
    def env_steps_per_s(self) -> float:
        """Aggregate env steps per second over every lane that this call ran, compile
        excluded; NaN when it ran none (a resumed run that had finished)."""
        if self.env_steps_run == 0:
            return math.nan
        return self.lanes * self.env_steps_run / max(self.run_time_s, 1e-9)

    def timings(self) -> dict[str, float | int]:
        """The times and the env steps this call ran, JSON-ready."""
        return {
            "wall_time_s": self.wall_time_s,
            "compile_time_s": self.compile_time_s,
            "run_time_s": self.run_time_s,
            "eval_time_s": self.eval_time_s,
            "env_steps_run": self.env_steps_run,
            "resumed_env_steps": self.resumed_env_steps,
        }
