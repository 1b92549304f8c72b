"""Memory sizes on the command line: ``512MiB``, ``2GiB``, ``800MB`` as bytes, checked
against this machine's memory (``--hypothesis-memory``, ``pmwcm serve``'s too)."""

from __future__ import annotations


class MemorySizeError(ValueError):
    """A memory size the command line cannot use; the message names the option."""


_MEMORY_UNITS = {
    "": 1,
    "B": 1,
    "K": 2**10, "KIB": 2**10, "KB": 10**3,
    "M": 2**20, "MIB": 2**20, "MB": 10**6,
    "G": 2**30, "GIB": 2**30, "GB": 10**9,
    "T": 2**40, "TIB": 2**40, "TB": 10**12,
}  # fmt: skip


def parse_memory(text: str, option: str = "--hypothesis-memory") -> int:
    """Bytes from ``"536870912"``, ``"512MiB"``, ``"2GiB"``, ``"1.5G"`` or ``"800MB"``.

    Raises:
        MemorySizeError: not a size, below one byte, or more than this machine has
            (the message names ``option``).

    ``KiB``/``MiB``/``GiB``/``TiB`` (and ``K``/``M``/``G``/``T``) are powers of
    1024, ``KB``/``MB``/``GB``/``TB`` powers of 1000; case and spaces are ignored.

    >>> parse_memory("512MiB"), parse_memory("2G"), parse_memory("1000"), parse_memory("1 kb")
    (536870912, 2147483648, 1000, 1000)
    """
    import re

    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).upper() if match else ""
    if match is None or unit not in _MEMORY_UNITS:
        raise MemorySizeError(
            f"{option} must be a number of bytes, optionally with a suffix (KiB, MiB, GiB, "
            f"TiB, KB, MB, GB, TB), e.g. 512MiB; got {text!r}."
        )
    value = int(float(match.group(1)) * _MEMORY_UNITS[unit])
    if value < 1:
        raise MemorySizeError(f"{option} must be at least 1 byte, got {text!r}.")
    physical = physical_memory()
    if physical is not None and value > physical:
        raise MemorySizeError(
            f"{option} {text} is more than this machine's memory ({_gib(physical)}): the "
            "hypothesis would fail to allocate. Give at most that, or keep the default "
            "(512MiB; larger universes then use the support backend)."
        )
    return value


def physical_memory() -> int | None:
    """This machine's physical memory in bytes, or ``None`` where the OS does not say."""
    import os

    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _gib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB"
