"""What the export checks print of the peer's source tree they ran: its git commit."""

from __future__ import annotations

import subprocess
from pathlib import Path


def checkout_commit(checkout: Path) -> str:
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else "unknown (not a git work tree)"
