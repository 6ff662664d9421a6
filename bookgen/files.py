"""Output files: written whole or not at all, and clear words when they cannot be.

Every command that writes a file other than a book (exports, start positions,
suites, models, reports, records) writes it through :func:`atomic_output`
(or :func:`atomic_write`, :class:`AtomicFile`): the data goes to
``.NAME.PID.tmp`` beside the target and is renamed over it when complete, so
an interrupted command never leaves a truncated file under the final name.
A process killed with ``kill -9`` cannot remove its temporary file; the next
write to the same target removes the temporary files of processes that are
gone.

:func:`unwritable_reason` and :func:`write_error` turn "cannot write" into
what is wrong (read-only file, directory or file system, disk full); the
book store uses them for its SQLite errors too.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from bookgen.errors import BookgenError

# Free space below which a write that failed without an errno (numpy's
# tofile, some SQLite I/O errors) is taken for a full disk.
_NEARLY_FULL_BYTES = 1 << 20


def temporary_path(path: Path, pid: int | None = None) -> Path:
    """``.NAME.PID.tmp`` beside ``path``: where this process builds it."""
    return path.with_name(f".{path.name}.{os.getpid() if pid is None else pid}.tmp")


def process_alive(pid: int) -> bool:
    """True while a process with this id exists (also one of another user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OSError, OverflowError, ValueError):
        return False
    return True


def remove_stale_temporaries(path: Path) -> list[Path]:
    """Remove the ``.NAME.PID.tmp`` files of ``path`` left by processes that are
    gone (killed while writing it); returns the files removed."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.(\d+)\.tmp")
    removed: list[Path] = []
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return removed
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        pid = int(match.group(1))
        if pid == os.getpid() or process_alive(pid):
            continue
        try:
            os.unlink(entry.path)
            removed.append(Path(entry.path))
        except OSError:
            pass  # another process removed it first, or we may not: leave it
    return removed


def _read_only_file_system(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def unwritable_reason(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` (an existing file, or one to be created) cannot be written,
    in words (``read-only file``, ``read-only directory DIR``, ``read-only
    file system``), or None when it can. SQLite books also need their
    directory: the ``-wal``, ``-shm`` and lock files live beside them."""
    path = Path(path)
    directory = path.parent
    if path.exists() and not os.access(path, os.W_OK):
        return "read-only file system" if _read_only_file_system(path) else "read-only file"
    if directory.is_dir() and not os.access(directory, os.W_OK | os.X_OK):
        if _read_only_file_system(directory):
            return "read-only file system"
        return f"read-only directory {directory}"
    return None


def disk_nearly_full(path: str | os.PathLike[str]) -> bool:
    """True when the file system holding ``path`` has (almost) no space left."""
    try:
        stat = os.statvfs(Path(path).parent)
    except OSError:
        return False
    return stat.f_bavail * stat.f_frsize < _NEARLY_FULL_BYTES


def disk_full_message(path: str | os.PathLike[str], kept: str) -> str:
    return f"disk full while writing {path}; {kept}"


def write_error(path: str | os.PathLike[str], error: OSError,
                kept: str | None = None) -> BookgenError:
    """A one-line error for a failed write of ``path`` (``kept`` says what is
    left of it; default: ``PATH is unchanged``)."""
    kept = kept if kept is not None else f"{path} is unchanged"
    if error.errno in (errno.ENOSPC, errno.EDQUOT) or (
            error.errno is None and disk_nearly_full(path)):
        return BookgenError(disk_full_message(path, kept))
    if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        reason = unwritable_reason(path)
        if reason is not None:
            return BookgenError(f"{path}: {reason}, cannot write")
    return BookgenError(f"{path}: cannot write ({error.strerror or error})")


def _check_place(path: Path) -> None:
    if path.is_dir():
        raise BookgenError(f"{path}: is a directory")
    if not path.parent.is_dir():
        raise BookgenError(f"{path}: directory {path.parent} does not exist")


def check_output(path: str | os.PathLike[str],
                 protected: Sequence[str | os.PathLike[str]] = ()) -> None:
    """Raise a one-line error unless ``path`` can take an output: its directory
    exists, it is not a directory, and it is none of the ``protected`` input files."""
    path = Path(path)
    _check_place(path)
    resolved = path.resolve()
    for other in protected:
        if Path(other).resolve() == resolved:
            raise BookgenError(f"{path}: would overwrite an input file")


def check_writable(path: str | os.PathLike[str]) -> None:
    """Raise a one-line error unless ``path`` can be written (or created)."""
    path = Path(path)
    _check_place(path)
    reason = unwritable_reason(path)
    if reason is not None:
        raise BookgenError(f"{path}: {reason}, cannot write")


@contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield the temporary path to write ``path``'s new content to; on success
    it is renamed over ``path``, on any error removed (``path`` unchanged).

    Stale temporary files of ``path`` from killed processes are removed first.
    An ``OSError`` becomes a one-line :class:`BookgenError` saying what is
    wrong (read-only, disk full).
    """
    path = Path(path)
    check_writable(path)
    remove_stale_temporaries(path)
    temporary = temporary_path(path)
    try:
        yield temporary
        os.replace(temporary, path)
    except OSError as error:
        failure = write_error(path, error)  # before the space is given back
        temporary.unlink(missing_ok=True)
        raise failure from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (synced before the rename)."""
    with atomic_output(path) as temporary, open(temporary, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def make_folder(path: str | os.PathLike[str]) -> Path:
    """Create the folder ``path`` (parents too) for output files (CSA records); a
    one-line :class:`BookgenError` when it cannot be."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise BookgenError(f"{path}: cannot create ({error.strerror})") from None
    return path


class AtomicFile:
    """A binary output stream built in ``.NAME.PID.tmp``, renamed over ``path``
    by :meth:`commit` and removed by :meth:`discard` (for outputs written
    piece by piece; ``append`` starts from the current content of ``path``)."""

    def __init__(self, path: str | os.PathLike[str], append: bool = False) -> None:
        self.path = Path(path)
        check_writable(self.path)
        remove_stale_temporaries(self.path)
        self.temporary = temporary_path(self.path)
        try:
            if append and self.path.exists():
                shutil.copyfile(self.path, self.temporary)
            self.handle: BinaryIO = open(self.temporary, "ab")
        except OSError as error:
            self._fail(error)

    def _fail(self, error: OSError) -> None:
        failure = write_error(self.path, error)
        self.discard()
        raise failure from None

    def write(self, data: bytes) -> None:
        try:
            self.handle.write(data)
        except OSError as error:
            self._fail(error)

    def commit(self) -> None:
        try:
            self.handle.flush()
            os.fsync(self.handle.fileno())
            self.handle.close()
            os.replace(self.temporary, self.path)
        except OSError as error:
            self._fail(error)

    def discard(self) -> None:
        handle = getattr(self, "handle", None)
        if handle is not None:
            try:
                handle.close()
            except OSError:
                pass
        self.temporary.unlink(missing_ok=True)
