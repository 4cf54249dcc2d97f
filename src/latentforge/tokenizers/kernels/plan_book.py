"""Which kernel plan runs each convolution of a build: one recorded name per convolution signature.

A build decides every signature its shapes need in one process before any rank starts (pipeline/kernel_plan_pass.py);
its ranks then replay that book and may not choose (`replay_only`: a signature it lacks is an error, never timed
in a rank). So the kernel choice is recorded and replayed, never raced: the same input gives the same bits in any
process that uses the same book on the same GPU model and software.

A book kept in a file is shared by every process of one environment; it is only ever extended (a recorded
choice never changes), under an exclusive lock, so two ranks meeting a new signature at once still agree. A book
that no longer parses is refused, never silently emptied: its choices decided bits already written.
"""

from __future__ import annotations

import fcntl
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from ...errors import DamagedFile, LatentforgeError
from ...io import canonical_json, write_text_atomic

REDECIDE = ("delete it: the plans it held are then chosen again (from the machine's shared book, else timed anew), "
            "and latents encoded with those choices may differ in bits from latents encoded before")


class PlanMissing(LatentforgeError):
    """A replaying process met a convolution its book does not record: the plan pass did not foresee it."""

    def __init__(self, signature: str):
        super().__init__(
            f"the convolution {signature} has no decided kernel plan: the build's plan pass, which encodes every "
            "batch shape of the build before any rank starts, did not meet it, and a rank never times plans of "
            "its own. This is a latentforge bug (please report it with the build's config); "
            "tokenizer.conv_kernels=heuristics builds without recorded plans meanwhile")


def read_book(path: Path) -> dict[str, str]:
    """{signature: plan name} of a book file ({} when there is none); DamagedFile when it is not such a map."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        raise DamagedFile(path, str(error), REDECIDE) from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise DamagedFile(path, "not a map of convolution signatures to plan names", REDECIDE)
    return data


class PlanBook:
    """signature -> plan name; in memory, or backed by a JSON file that several processes share. A signature it
    lacks is asked of its `parent` book (and tuned there when that lacks it too), then recorded here; with
    `replay_only` it raises PlanMissing instead."""

    def __init__(self, path: Path | None = None, entries: dict[str, str] | None = None,
                 parent: PlanBook | None = None, replay_only: bool = False):
        self.path = Path(path) if path is not None else None
        self.parent = parent
        self.replay_only = replay_only
        self._entries: dict[str, str] = dict(entries or {})
        if self.path is not None:
            self._entries.update(self._read())

    def choose(self, signature: str, tune: Callable[[], str]) -> str:
        """The recorded plan of `signature`; when there is none, the parent's (or `tune()`'s) choice, recorded."""
        if signature in self._entries:
            return self._entries[signature]
        if self.path is None:
            self._entries[signature] = self._ask(signature, tune)
            return self._entries[signature]
        with self._locked():
            self._entries.update(self._read())  # another process may have recorded it meanwhile
            if signature not in self._entries:
                self._entries[signature] = self._ask(signature, tune)
                self._write()
        return self._entries[signature]

    def _ask(self, signature: str, tune: Callable[[], str]) -> str:
        if self.replay_only:
            raise PlanMissing(signature)
        return self.parent.choose(signature, tune) if self.parent is not None else tune()

    def entries(self) -> dict[str, str]:
        return dict(sorted(self._entries.items()))

    def __len__(self) -> int:
        return len(self._entries)

    # ------------------------------------------------------------------------------------------- file

    def _read(self) -> dict[str, str]:
        assert self.path is not None
        return read_book(self.path)

    def _write(self) -> None:
        assert self.path is not None
        write_text_atomic(self.path, canonical_json(self.entries()))

    @contextmanager
    def _locked(self) -> Iterator[None]:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
