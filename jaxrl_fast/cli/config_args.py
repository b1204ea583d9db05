"""The run's config from the command line's arguments: the preset (or a resumed run's), then
`--config FILE`, the short options, the field options and `--set`; shared by `train`, `plan`
and `sweep`."""

from __future__ import annotations

import argparse
import os
import tempfile

from jaxrl_fast import presets
from jaxrl_fast.config import TrainConfig, aliases
from jaxrl_fast.presets import dqn_family

FIELD_DEST = "field:"  # argparse dest prefix of the generated field options


def base_config(args: argparse.Namespace):
    """The config the options change: the preset; when resuming without --preset, the run's
    own config.json."""
    from jaxrl_fast.config import options

    if args.preset is None and getattr(args, "resume", None) is not None:
        saved = os.path.join(args.resume, "config.json")
        if os.path.exists(saved):
            return options.from_dict(options.load_file(saved))
    return presets.get(args.preset or presets.DEFAULT)


def build_config(args: argparse.Namespace):
    """The run's config: the preset (or the resumed run's), then --algo, then --config FILE,
    then the short options (--env, --seeds, --capacity, ...), then the field options
    (--dqn.learning-rate ...), then --set FIELD=VALUE; later ones win."""
    from jaxrl_fast.config import options

    if getattr(args, "l3", None) == "disk" and getattr(args, "spill_dir", None) is None:
        args.spill_dir = tempfile.gettempdir()  # where L3 files go by default
    config = base_config(args)
    if getattr(args, "algo", None) is not None:
        config = dqn_family.apply(args.algo, config)
    if args.config is not None:
        config = options.apply(config, options.load_file(args.config))
    # the short options (--env, --seeds, --capacity, --precision, ...): the fields' declared
    # aliases (`knob(alias=...)`), each an argparse dest of the alias's name
    short = {
        field: value
        for field, alias in aliases(TrainConfig).items()
        if (value := getattr(args, alias[2:].replace("-", "_"), None)) is not None
    }
    if getattr(args, "fallback", False):
        short["precision.fallback"] = True
    config = options.apply(config, short)
    given = {
        f.name: options.parse_value(text, f)
        for f in options.fields()
        if (text := getattr(args, FIELD_DEST + f.name, None)) is not None
    }
    both = sorted(set(short) & set(given))
    if both:  # e.g. --seeds 2 --num-seeds 3: which one was meant is not ours to guess
        alias = aliases(TrainConfig)
        said = "; ".join(
            f"{alias[name]} {short[name]!r} and --{name.replace('_', '-')} {given[name]!r}"
            for name in both
        )
        raise ValueError(f"two options set the same field: {said}. Give one of each pair.")
    given.update(options.parse_set(args.set or []))
    return options.apply(config, given)
