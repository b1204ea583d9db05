"""`python -m jaxrl_fast.cli ...`: the command line."""

import sys

from jaxrl_fast.cli.main import main

sys.exit(main())
