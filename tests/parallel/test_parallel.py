"""Seeds spread over several (CPU) devices, in a fresh process with 2 forced devices."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import jax
import pytest
from conftest import child_env

from jaxrl_fast.parallel import seed_devices, seed_specs

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import jaxrl_fast.parallel as par
    assert par.use_cpu_cores(2)
    import jax, numpy as np
    sys.path.insert(0, "tests")
    from conftest import tiny_config
    from jaxrl_fast.run.train import train
    assert len(jax.devices()) == 2
    cfg = tiny_config(total_env_steps=120, learning_starts=80, num_chunks=1)  # 10 updates
    two = train(cfg, progress=False)
    one = train(cfg, progress=False, devices=jax.devices()[:1])
    diff = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(
        jax.tree.leaves(two.runner.seeds.agent.params),
        jax.tree.leaves(one.runner.seeds.agent.params)))
    p0 = np.asarray(jax.tree.leaves(two.runner.seeds.agent.params)[0])
    print(json.dumps({"devices": [two.num_devices, one.num_devices], "diff": diff,
                      "seeds_differ": bool(not np.array_equal(p0[0], p0[1])),
                      "returns": two.final_return.tolist()}))
    """
)


@pytest.mark.slow
def test_two_devices_match_one_device():
    env = child_env()
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=os.path.join(os.path.dirname(__file__), "..", ".."),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["devices"] == [2, 1]
    assert out["diff"] < 1e-4, out
    assert out["seeds_differ"]
    assert len(out["returns"]) == 2


def test_seed_devices_uses_most_that_divide():
    devs = ["a", "b", "c", "d"]
    assert seed_devices(8, devs) == devs
    assert seed_devices(6, devs) == ["a", "b", "c"]
    assert seed_devices(5, devs) == ["a"]
    assert seed_devices(1, devs) == ["a"]


def test_seed_specs_replicate_shared_leaves():
    from jax.sharding import PartitionSpec as P

    specs = seed_specs({"per_seed": 0, "shared": None})
    assert specs == {"per_seed": P("seed"), "shared": P()}
    assert jax.tree.structure(specs, is_leaf=lambda x: isinstance(x, P)).num_leaves == 2
