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
from typing import Any, BinaryIO, Literal, TextIO, overload


def _default_mode() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


@overload
def atomic_open(
    path: str | os.PathLike[str], *, newline: str | None = ..., binary: Literal[False] = ...
) -> contextlib.AbstractContextManager[TextIO]: ...


@overload
def atomic_open(
    path: str | os.PathLike[str], *, newline: None = ..., binary: Literal[True]
) -> contextlib.AbstractContextManager[BinaryIO]: ...


def atomic_open(
    path: str | os.PathLike[str], *, newline: str | None = None, binary: bool = False
) -> contextlib.AbstractContextManager[TextIO] | contextlib.AbstractContextManager[BinaryIO]:
    """Opens a stream whose contents replace ``path`` only on success.

    The target keeps its permissions if it exists; a new file gets the
    umask's (as :func:`open` would give it).

    Args:
        path: the target file; its directory must exist.
        newline: passed to :func:`open` (``""`` for the csv module and pandas);
            text mode only.
        binary: a binary stream instead of a UTF-8 text stream.

    Returns:
        A context manager yielding a writable stream on a temporary file in
        the target's directory.

    Raises:
        OSError: if the directory does not exist or is not writable.
    """
    return _atomic(Path(path), newline=newline, binary=binary)


@contextlib.contextmanager
def _atomic(target: Path, *, newline: str | None, binary: bool) -> Iterator[Any]:
    mode = target.stat().st_mode & 0o777 if target.exists() else _default_mode()
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        if binary:
            stream: Any = os.fdopen(fd, "wb")
        else:
            stream = os.fdopen(fd, "w", encoding="utf-8", newline=newline)
        with stream as fh:
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


def atomic_write_bytes(path: str | os.PathLike[str], payload: bytes) -> None:
    """Writes ``payload`` to ``path`` atomically (see :func:`atomic_open`)."""
    with atomic_open(path, binary=True) as fh:
        fh.write(payload)
