"""Atomic file output: write to a temporary file beside the target, then rename.

A reader never sees a half-written file, and a failed write leaves the target
as it was (absent or unchanged).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO


def _default_mode() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], *, newline: str | None = None) -> Iterator[TextIO]:
    """Opens a UTF-8 text stream whose contents replace ``path`` only on success.

    Args:
        path: the target file; its directory must exist.
        newline: passed to :func:`open` (``""`` for the csv module and pandas).

    Yields:
        A writable text stream on a temporary file in the target's directory.

    Raises:
        OSError: if the directory does not exist or is not writable.
    """
    target = Path(path)
    mode = target.stat().st_mode & 0o777 if target.exists() else _default_mode()
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline=newline) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Writes ``text`` to ``path`` atomically (see :func:`atomic_open`)."""
    with atomic_open(path) as fh:
        fh.write(text)
