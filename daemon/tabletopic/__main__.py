"""``python -m tabletopic``: the same as the ``tabletopic`` command."""

import sys

from tabletopic.cli import main

sys.exit(main())
