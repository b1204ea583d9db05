"""The command line's argument parser: short error blocks, negative numbers after options."""

from __future__ import annotations

import argparse
import re
from typing import Sequence


class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one short block: the error, the option's help line,
    and where the full help is (instead of the whole usage)."""

    def error(self, message: str):  # noqa: D102 (argparse's)
        lines = [f"{self.prog}: error: {message}"]
        named = re.match(r"argument ([^\s:/]+)", message)
        action = self._option_string_actions.get(named.group(1)) if named else None
        if action is not None and action.help:
            metavar = f" {action.metavar}" if action.metavar else ""
            lines.append(f"  {named.group(1)}{metavar}: {action.help.replace('%%', '%')}")
        lines.append(f"(`{self.prog} --help` lists the options)")
        self.exit(2, "\n".join(lines) + "\n")


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
