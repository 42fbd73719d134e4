"""``python -m tokenbook`` = the ``tokenbook`` command."""

import sys

from .cli import main

sys.exit(main())
