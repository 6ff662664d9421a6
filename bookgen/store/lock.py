"""One writer per book: an advisory lock on ``BOOK-lock`` beside the book.

Every :class:`bookgen.store.Book` opened for writing holds the lock of its
file until it is closed; readers never take it. The lock is an ``flock`` on
the sidecar file ``NAME-lock``, which also holds the holder's pid and command
line so that a second writer can say who is writing. The operating system
releases it when the holder dies (``kill -9`` included), so a lock is never
stale: the next writer simply takes it. The file is removed when the lock is
released; a waiter that was handed the lock of a removed file tries again.

Within one process the lock is re-entrant (a ``refine mistakes --iterate``
run opens the book again for its ``grow`` steps): it is held until the last
writer of the process closes. The descriptor is never inherited: it is
close-on-exec for engines and spawned workers, and forked children close
their copy at once, so that a child outliving its parent cannot keep the
book locked.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bookgen.errors import BookgenError
from bookgen.files import process_alive, unwritable_reason

LOCK_SUFFIX = "-lock"
_COMMAND_CHARS = 300  # longest command line written to (and quoted from) the lock file


class BookLocked(BookgenError):
    """Another process is writing the book."""


def lock_path(book: str | os.PathLike[str]) -> Path:
    """``NAME-lock`` beside the book's real file (as SQLite's ``-wal``: a book
    reached through a symbolic link has one lock)."""
    book = Path(os.path.realpath(book))
    return book.with_name(book.name + LOCK_SUFFIX)


def _command_line() -> str:
    argv = list(sys.argv) or ["python"]
    head = Path(argv[0])
    if head.parts[-2:] == ("bookgen", "__main__.py") or \
            head.parts[-3:] == ("bookgen", "cli", "__main__.py"):
        argv[0] = "bookgen"  # python -m bookgen(.cli)
    else:
        argv[0] = head.name or "python"
    text = shlex.join(argv)
    return text if len(text) <= _COMMAND_CHARS else text[:_COMMAND_CHARS - 3] + "..."


class _Held:
    """This process's hold on one lock file."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd
        self.count = 1
        self.pid = os.getpid()


_held: dict[str, _Held] = {}
_held_guard = threading.Lock()


def _forget_in_child() -> None:
    """In a forked child: drop the inherited descriptors (the parent holds the
    locks; a child that outlives it must not keep them)."""
    global _held_guard
    _held_guard = threading.Lock()  # another thread may have held it at the fork
    for held in _held.values():
        try:
            os.close(held.fd)
        except OSError:
            pass
    _held.clear()


os.register_at_fork(after_in_child=_forget_in_child)


def holder(book: str | os.PathLike[str]) -> tuple[int, str] | None:
    """(pid, command line) of the live process named in the book's lock file,
    or None (no lock file, unreadable, or its process is gone)."""
    try:
        info = json.loads(lock_path(book).read_text(encoding="utf-8"))
        pid, command = int(info["pid"]), str(info["command"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (pid, command) if process_alive(pid) else None


def _describe_holder(book: Path) -> str:
    # The holder writes its name just after taking the lock: give it a moment.
    for _ in range(40):
        found = holder(book)
        if found is not None:
            return f"pid {found[0]} ({found[1]})"
        time.sleep(0.025)
    return "another process"


def _open(path: Path) -> int:
    flags = os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        return os.open(path, os.O_RDWR | flags, 0o666)
    except PermissionError:
        return os.open(path, os.O_RDONLY | flags)  # another user's lock file


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _lock_error(book: Path, error: OSError) -> BookgenError:
    reason = unwritable_reason(lock_path(book))
    if reason is not None:
        return BookgenError(f"{book}: {reason}, cannot write")
    return BookgenError(f"{book}: cannot lock {lock_path(book).name} for writing "
                        f"({error.strerror or error})")


def acquire(book: str | os.PathLike[str], *, wait: bool = False) -> str:
    """Take the writer lock of ``book`` (re-entrant within this process);
    returns the key to give to :func:`release`.

    Raises :class:`BookLocked` naming the holder when another process writes
    the book, or, with ``wait``, blocks until it is done (saying so on stderr).
    """
    book = Path(book)
    path = lock_path(book)
    key = os.path.realpath(path)
    said_waiting = False
    while True:
        with _held_guard:
            held = _held.get(key)
            if held is not None:
                held.count += 1
                return key
            fd = _open_or_explain(book, path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                who = _describe_holder(book)
                if not wait:
                    os.close(fd)
                    raise BookLocked(f"{book} is being written by {who}; wait for it or "
                                     "pass --wait") from None
            else:
                if _take(key, path, fd):
                    return key
                continue
        if not said_waiting:
            print(f"bookgen: {book} is being written by {who}; waiting for it",
                  file=sys.stderr, flush=True)
            said_waiting = True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # outside the guard: other books stay usable
        except BaseException:
            os.close(fd)
            raise
        with _held_guard:
            if _take(key, path, fd):
                return key


def _open_or_explain(book: Path, path: Path) -> int:
    try:
        return _open(path)
    except OSError as error:
        raise _lock_error(book, error) from None


def _take(key: str, path: Path, fd: int) -> bool:
    """Register the lock just obtained on ``fd`` (guard held); False (``fd``
    closed) when its file was removed by the previous holder meanwhile."""
    if not _same_file(fd, path):
        os.close(fd)
        return False
    try:
        record = json.dumps({"pid": os.getpid(), "command": _command_line()}) + "\n"
        os.ftruncate(fd, 0)
        os.pwrite(fd, record.encode("utf-8"), 0)
    except OSError:
        pass  # a lock file we may only read (another user's): the lock still holds
    _held[key] = _Held(path, fd)
    return True


@contextmanager
def writing(book: str | os.PathLike[str], *, wait: bool = False) -> Iterator[None]:
    """Hold the writer lock of ``book`` for a block: a long command takes it
    before it starts engines or workers, so that a second writer is refused at
    once rather than after a slow engine start."""
    key = acquire(book, wait=wait)
    try:
        yield
    finally:
        release(key)


def release(key: str) -> None:
    """Give back one hold taken by :func:`acquire`; the last one unlocks."""
    with _held_guard:
        held = _held.get(key)
        if held is None or held.pid != os.getpid():
            return  # e.g. a forked child closing the parent's book: not ours
        held.count -= 1
        if held.count:
            return
        del _held[key]
        try:
            if _same_file(held.fd, held.path):
                held.path.unlink()
        except OSError:
            pass
        os.close(held.fd)
