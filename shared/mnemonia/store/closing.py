"""The mark an embedded store's clean close leaves in its folder, so that the next open can
skip comparing Chroma with the side-store.

The check at open (:func:`mnemonia.consistency.verify`) asks Chroma for the count of every
tenant's collection, and Chroma's first touch of a collection in a process loads it: ~15-30 ms
a collection, whatever its size (2026-12-02, 1,000 tenants of 3 memories: 25 of the open's 27
s, the machine shared with two fills), so the open of a store grew with its tenants (13.6-16.6
s at 1,000 tenants x 1,000). What the check looks for can only come from a process that did
not close (a crash between the two stores' writes), a write that failed, or a change made to
the files from outside; a process that closed after writes that all went through, on stores
whose open was checked (or itself skipped after such a close), leaves them consistent.

So an engine that closes an embedded store (both stores in the folder, which it locked) in
that state writes :data:`MARK`, holding the identity, size and modification time of the two
SQLite files (and their logs) as the close left them; the next open removes the mark before
anything else touches the store and skips the comparison only when every file is as recorded.
A crash leaves no mark (it was removed at open); a copy, a restore or an edit changes a
file's identity or time: the open then checks as before.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

__all__ = ["MARK", "WATCHED", "mark_clean_close", "take_clean_close"]

log = logging.getLogger("mnemonia.store")

MARK = ".mnemonia.closed"
"""The file a clean close leaves in an embedded store's folder."""

WATCHED = ("mnemonia.sqlite3", "mnemonia.sqlite3-wal", "chroma/chroma.sqlite3",
           "chroma/chroma.sqlite3-wal")
"""The files whose state the mark records (Chroma's counts come from its SQLite file)."""

_VERSION = 1


def _files(folder: Path) -> dict[str, list[int] | None]:
    """``{file: [inode, size, mtime_ns]}`` of :data:`WATCHED` (``None``: missing)."""
    out: dict[str, list[int] | None] = {}
    for name in WATCHED:
        try:
            st = os.stat(folder / name)
        except FileNotFoundError:
            out[name] = None
        else:
            out[name] = [st.st_ino, st.st_size, st.st_mtime_ns]
    return out


def _sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def take_clean_close(folder: Path) -> bool:
    """Whether the last process to open the store at ``folder`` closed it cleanly and its
    files are as that close left them. The mark is removed first (a process that stops from
    here on without closing leaves none); if it cannot be removed, ``False``."""
    path = folder / MARK
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    except OSError as e:
        log.warning("could not read %s (the open checks the stores): %s", path, e)
        return False
    try:
        path.unlink()
        _sync_folder(folder)
    except OSError as e:
        log.warning("could not remove %s (the open checks the stores): %s", path, e)
        return False
    try:
        recorded = json.loads(text)
    except ValueError:
        return False
    return (isinstance(recorded, dict) and recorded.get("version") == _VERSION
            and recorded.get("files") == _files(folder))


def mark_clean_close(folder: Path) -> None:
    """Leave the mark of a clean close (the stores closed: their files are final). Written
    to a temporary file, synced and renamed, so a mark is whole or absent."""
    path, tmp = folder / MARK, folder / (MARK + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"version": _VERSION, "files": _files(folder)}, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        _sync_folder(folder)
    except OSError as e:  # no mark: the next open checks the stores
        log.warning("could not write %s (the next open checks the stores): %s", path, e)
