from __future__ import annotations

import sys

from evokernel.cli import main

sys.exit(main())
