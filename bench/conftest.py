"""bench/ is a folder of scripts, not a package: let its tests import them by name."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
