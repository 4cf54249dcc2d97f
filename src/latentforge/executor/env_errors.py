"""Environment faults (disk full, permission denied, read-only file system) as messages a user can act on."""

from __future__ import annotations

import errno
import os
import re

_KINDS = {
    errno.ENOSPC: ("disk full", "free space"),
    errno.EDQUOT: ("disk quota exceeded", "free space or raise the quota"),
    errno.EFBIG: ("file size limit reached (disk full or ulimit -f)", "free space or raise the limit"),
    errno.EACCES: ("permission denied", "give this user write access"),
    errno.EPERM: ("operation not permitted", "give this user write access"),
    errno.EROFS: ("read-only file system", "mount it read-write or choose another output root"),
}


def environment_message(error: OSError) -> str | None:
    """A one-line description for the OSErrors a user fixes outside latentforge; None for any other."""
    kind = _KINDS.get(error.errno)
    if kind is None:
        return None
    what, fix = kind
    where = f" writing {error.filename}" if error.filename else ""
    return f"{what}{where} ({error.strerror}); {fix}, then rerun the same command to resume"


# h5py reports a failed write as RuntimeError("... filename = '...', ... errno = 28, ...") instead of OSError.
_HDF5_ERRNO = re.compile(r"filename = '([^']*)'.*?errno = (\d+)", re.S)


def as_os_error(error: BaseException) -> OSError | None:
    """The OSError behind `error` (itself, or the errno an HDF5 write failure names); None when there is none."""
    if isinstance(error, OSError):
        return error
    if isinstance(error, RuntimeError):
        match = _HDF5_ERRNO.search(str(error))
        if match:
            number = int(match.group(2))
            return OSError(number, os.strerror(number), match.group(1))
    return None
