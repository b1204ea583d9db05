"""The command line: `jaxrl-fast train / sweep / plan / plot / xla-report / launch / presets /
envs` (`main`), with options generated from the config's fields."""

from jaxrl_fast.cli.main import main, make_parser

__all__ = ["main", "make_parser"]
