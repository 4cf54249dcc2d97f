"""What ROOT/build/lock holds while a build runs: its holder's pid, host and a token unique to that run.

Ray workers compare the token with the one their driver gave them before every staged write, so a worker of a
build that lost its lock writes nothing more (builder/lock.py takes the lock; executor/ray/session.py finds
the processes that carry a token)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from ..cache.layout import LOCK


@dataclass(frozen=True)
class LockRecord:
    pid: int
    host: str
    token: str

    def to_text(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def parse(cls, text: str) -> LockRecord | None:
        """None for an empty file or one written by an older latentforge (the bare pid)."""
        try:
            data = json.loads(text)
            return cls(int(data["pid"]), str(data["host"]), str(data["token"]))
        except (ValueError, TypeError, KeyError):
            return None


def read_lock_record(build_dir: Path | str) -> LockRecord | None:
    try:
        return LockRecord.parse((Path(build_dir) / LOCK).read_text(encoding="utf-8"))
    except OSError:
        return None
