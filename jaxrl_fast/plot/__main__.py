"""`python -m jaxrl_fast.plot DIR [DIR ...]`: the `jaxrl-fast plot` command."""

import sys

from jaxrl_fast.plot.command import main

sys.exit(main())
