"""What the tests share: tiny worlds and builds, media writers, fake caches and the reference modules we did not
write. REPO is the repository root."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
