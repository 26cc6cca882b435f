"""Where the measured training data lives for tests that read it: beside the checkout
(../shared/data/measured) or $SRIFT_DATA_DIR. CI's clean clone may not have it, and an installed
srift cannot find it from site-packages, so such tests skip when it is absent."""
from __future__ import annotations

import os
from pathlib import Path

_REPO = Path(__file__).resolve().parents[2]
MEASURED = Path(os.environ.get("SRIFT_DATA_DIR") or _REPO.parent / "shared" / "data" / "measured")
