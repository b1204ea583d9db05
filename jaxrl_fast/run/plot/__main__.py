"""`python -m jaxrl_fast.run.plot DIR [DIR ...]`: the `jaxrl-fast plot` command."""

import sys

from jaxrl_fast.run.plot.command import main

sys.exit(main())
