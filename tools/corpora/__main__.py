"""`python -m zoo.tools.corpora SOURCE OUT`."""

import sys

from zoo.tools.corpora import main

sys.exit(main())
