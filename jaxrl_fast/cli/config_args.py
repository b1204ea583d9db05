"""The run's config from the command line's arguments: the preset (or a resumed run's), then
`--config FILE`, the short options, the field options and `--set`; shared by `train`, `plan`
and `sweep`."""

from __future__ import annotations

import argparse
import os
import tempfile

from jaxrl_fast import presets

FIELD_DEST = "field:"  # argparse dest prefix of the generated field options
# Replay options of `plan`: argparse dests named as their ReplayConfig fields.
REPLAY_FIELDS = (
    "capacity",
    "batch_size",
    "n_step",
    "prioritised",
    "sampler",
    "l3",
    "l3_capacity",
    "l3_share",
    "spill_dir",
    "spill_block",
)


def base_config(args: argparse.Namespace):
    """The config the options change: the preset; when resuming without --preset, the run's
    own config.json."""
    from jaxrl_fast import options

    if args.preset is None and getattr(args, "resume", None) is not None:
        saved = os.path.join(args.resume, "config.json")
        if os.path.exists(saved):
            return options.from_dict(options.load_file(saved))
    return presets.get(args.preset or presets.DEFAULT)


def build_config(args: argparse.Namespace):
    """The run's config: the preset (or the resumed run's), then --config FILE, then the short
    options (--env, --seeds, --capacity, ...), then the field options (--dqn.learning-rate ...),
    then --set FIELD=VALUE; later ones win."""
    from jaxrl_fast import options

    if getattr(args, "l3", None) == "disk" and getattr(args, "spill_dir", None) is None:
        args.spill_dir = tempfile.gettempdir()  # where L3 files go by default
    config = base_config(args)
    if args.config is not None:
        config = options.apply(config, options.load_file(args.config))
    changes: dict = {}
    env_changes: dict = {}
    if args.env is not None:
        env_changes["name"] = args.env
    if args.num_envs is not None:
        env_changes["num_envs"] = args.num_envs
    if env_changes:
        changes["env"] = env_changes
    if args.seeds is not None:
        changes["num_seeds"] = args.seeds
    replay_changes = {
        field: getattr(args, field)
        for field in REPLAY_FIELDS
        if getattr(args, field, None) is not None
    }
    if replay_changes:
        changes["replay"] = replay_changes
    precision_changes = {
        field: getattr(args, arg)
        for field, arg in (
            ("compute", "precision"),
            ("loss_scale", "loss_scale"),
            ("matmul_precision", "matmul_precision"),
        )
        if getattr(args, arg, None) is not None
    }
    if getattr(args, "no_fallback", False):
        precision_changes["fallback"] = False
    if precision_changes:
        changes["precision"] = precision_changes
    config = config.replace(**changes)
    given = {
        f.name: options.parse_value(text, f)
        for f in options.fields()
        if (text := getattr(args, FIELD_DEST + f.name, None)) is not None
    }
    given.update(options.parse_set(args.set or []))
    return options.apply(config, given)
