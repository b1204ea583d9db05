"""The command line's argument parser: short error blocks, negative numbers after options."""

from __future__ import annotations

import argparse
import re
import textwrap
from typing import Sequence

from jaxrl_fast.cli.config_args import FIELD_DEST


class Formatter(argparse.HelpFormatter):
    """argparse's help layout, never breaking a line inside an option name at a hyphen."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        text = " ".join(text.split())
        return textwrap.fill(
            text, width, initial_indent=indent, subsequent_indent=indent,
            break_on_hyphens=False, break_long_words=False,
        )  # fmt: skip

    def _split_lines(self, text: str, width: int) -> list[str]:
        text = " ".join(text.split())
        return textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False)


class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one short block: the error, the option's help line,
    and where the full help is (instead of the whole usage)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # noqa: D102 (argparse's)
        lines = [f"{self.prog}: error: {message}"]
        named = re.match(r"argument ([^\s:/]+)", message)
        action = self._option_string_actions.get(named.group(1)) if named else None
        if action is not None and action.help:
            metavar = f" {action.metavar}" if action.metavar else ""
            lines.append(f"  {named.group(1)}{metavar}: {_help_of(action).replace('%%', '%')}")
        lines.append(f"(`{self.prog} --help` lists the options)")
        self.exit(2, "\n".join(lines) + "\n")


def _help_of(action: argparse.Action) -> str:
    """An option's help line; a config field's own when `--help` lists only its name."""
    if action.help == argparse.SUPPRESS and action.dest.startswith(FIELD_DEST):
        from jaxrl_fast.config import options

        return options.help_text(options.field(action.dest[len(FIELD_DEST) :]))
    return action.help


_NEGATIVE = re.compile(r"^-(\d|\.\d|inf$|nan$)")


def negative_values(argv: Sequence[str]) -> list[str]:
    """`--opt -1e-3` as `--opt=-1e-3`: argparse reads a negative number in exponent form (or
    -inf) after an option as another option."""
    out: list[str] = []
    for token in argv:
        if out and _NEGATIVE.match(token) and out[-1].startswith("--") and "=" not in out[-1]:
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


def add_field_args(parser: argparse.ArgumentParser, full_help: bool = False) -> None:
    """Add one option per config field (`jaxrl_fast.config.options`), grouped by part.
    `--help` lists each group's option names; `--help-all` gives each its own help line."""
    from jaxrl_fast.config import options

    by_part: dict[str, list] = {}
    for f in options.fields():
        by_part.setdefault(f.name.rsplit(".", 1)[0] if "." in f.name else "run", []).append(f)
    for i, (part, fields) in enumerate(by_part.items()):
        title = "TrainConfig" if part == "run" else f"TrainConfig.{part}"
        hint = " (--help-all: what each one does)" if i == 0 else ""  # said once, at the top
        about = (
            "override the preset, --config and the short options above; defaults are the "
            "dataclass's (a preset may set others: --print-config shows the resolved run)"
            if full_help
            else f"{', '.join(f.option for f in fields)}{hint}"
        )
        group = parser.add_argument_group(f"{title} fields", about)
        for f in fields:
            group.add_argument(
                f.option,
                dest=FIELD_DEST + f.name,
                metavar=options.metavar(f),
                help=options.help_text(f) if full_help else argparse.SUPPRESS,
            )


def add_help_all(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--help-all",
        action="store_true",
        help="show every config field's option with its help line, and exit",
    )
