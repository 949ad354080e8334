"""`python -m zoo ...` is the `zoo` command."""

import sys

from zoo.tools.cli import main

sys.exit(main())
