"""The shell's chunk log: one record per chunk (`ChunkLog`), the NaN/inf check of each chunk's
loss (`check_finite`), the fp32-switch warning and the progress bar's figures."""

from __future__ import annotations

import time
import warnings
from typing import Any, Callable

import numpy as np
import tqdm

from jaxrl_fast.agent.precision import PrecisionPolicy
from jaxrl_fast.config import TrainConfig
from jaxrl_fast.loop import ChunkMetrics, TrainFns
from jaxrl_fast.parallel.distributed import to_host


def check_finite(
    metrics: ChunkMetrics, chunk: int, env_steps: int, config: TrainConfig, precision
) -> None:
    """Raise `FloatingPointError` if a seed's mean loss over the chunk is NaN or inf.

    Args:
      metrics: one chunk's metrics, on the host.
      chunk: the chunk's index; env_steps: env steps per seed at its end (for the message).
      config: the run; precision: its `PrecisionPolicy` (for the message's advice).
    """
    loss = np.asarray(metrics.loss)
    if np.all(np.isfinite(loss)):
        return
    bad = np.flatnonzero(~np.isfinite(loss)).tolist()
    where = f"chunk {chunk} (env steps <= {env_steps})"
    updates = config.blocks_per_chunk * config.updates_per_block
    if precision.skip_nonfinite and np.all(np.asarray(metrics.skipped)[bad] >= updates):
        raise FloatingPointError(
            f"every update in {where} was skipped for non-finite gradients for seed indices "
            f"{bad} ({precision.describe()}); set PrecisionConfig.fallback=True, "
            f"compute='fp32', or lower the learning rate."
        )
    raise FloatingPointError(
        f"loss became non-finite in {where} for seed indices {bad}; lower "
        f"DQNConfig.learning_rate or set max_grad_norm."
    )


class ChunkLog:
    """The run's record, one entry per chunk: `history` (dicts), progress, the fp32 switch.

    `record` reads one chunk's metrics on the host, checks them (`check_finite`), warns once
    when the compute switches to fp32, appends the chunk's record (its replay counters as the
    buffer reports them) and advances the progress bar.
    """

    def __init__(
        self, fns: TrainFns, bar: tqdm.tqdm, on_chunk: Callable[[dict], None] | None, start: float
    ) -> None:
        self.config: TrainConfig = fns.run.config
        self.precision: PrecisionPolicy = fns.run.precision
        self.report = fns.buffer.report
        self.bar, self.on_chunk, self.start = bar, on_chunk, start
        self.history: list[dict] = []
        self.fallback_at: int | None = None
        self.last_eval: float | None = None  # mean over seeds of the latest evaluation
        self._counters: dict | None = None
        self.resumed_env_steps = 0  # env steps per seed done before a resume (rates skip them)

    def resume_counters(self, counters: dict) -> None:
        """Start from the replay counters of a restored checkpoint (so the first chunk after
        a resume reports its own interval, as it would have in the run that never stopped)."""
        self._counters = counters

    def record(
        self, chunk: int, metrics: ChunkMetrics, env_steps: int, evaluation: Any = None
    ) -> None:
        """Log chunk `chunk`, whose end is `env_steps` env steps per seed, and its `[S]`
        evaluation returns (an array, or None where the chunk was not evaluated)."""
        m = to_host(metrics)  # an all-gather in a multi-process run
        evaluation = None if evaluation is None else to_host(evaluation)
        check_finite(m, chunk, env_steps, self.config, self.precision)
        if self.fallback_at is None and np.any(m.fp32_fallback):
            self.fallback_at = env_steps
            warnings.warn(
                f"precision: compute switched to fp32 in chunk {chunk} (env steps <= "
                f"{env_steps}) after {int(np.max(np.asarray(m.skipped)))} skipped updates in "
                f"the chunk; the run continues in fp32",
                RuntimeWarning,
                stacklevel=4,
            )
        elapsed = time.perf_counter() - self.start
        rec = {"chunk": chunk, "env_steps": env_steps, "elapsed_s": elapsed}
        rec.update({f: np.asarray(getattr(m, f)).tolist() for f in ChunkMetrics._fields[:-1]})
        if evaluation is not None:
            rec["eval_return"] = np.asarray(evaluation, dtype=np.float64).tolist()
            self.last_eval = float(np.mean(rec["eval_return"]))
        replay = self.report(m.replay, self._counters)
        if replay:
            rec["replay"] = replay
        self._counters = m.replay
        self.history.append(rec)
        self._show(m, env_steps, elapsed)
        if self.on_chunk is not None:
            self.on_chunk(rec)

    def _show(self, m: ChunkMetrics, env_steps: int, elapsed: float) -> None:
        rets = np.asarray(m.episode_return)
        ran = env_steps - self.resumed_env_steps  # a resumed run: the steps this call ran
        sps = self.config.num_lanes * ran / max(elapsed, 1e-9)
        mean_ret = float(np.nanmean(rets)) if np.isfinite(rets).any() else float("nan")
        text = f"env-steps/s={sps:,.0f} return={mean_ret:.1f}"
        if self.last_eval is not None:
            text += f" eval={self.last_eval:.1f}"
        self.bar.set_postfix_str(text, refresh=False)
        self.bar.update(env_steps - self.bar.n)  # the first chunk's include the prefill
