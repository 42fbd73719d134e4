"""``python -m tokenbook`` = the ``tokenbook`` command."""

import sys

from tokenbook.book.cli import main

sys.exit(main())
