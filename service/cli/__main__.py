"""`python -m service.cli`: the `foley` command without its installed script."""

import sys

from service.cli import main

sys.exit(main())
