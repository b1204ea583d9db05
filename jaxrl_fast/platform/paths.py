"""Directories the library writes to: made if missing, refused with a one-line error if not."""

from __future__ import annotations

import os


def writable_dir(path: str | os.PathLike, name: str, hint: str = "") -> str:
    """Make directory `path` (and its parents) if missing and check that it can be written.

    Args:
      path: the directory.
      name: how the error names it, e.g. "run_dir" or "--out".
      hint: appended to the not-writable error (what to do instead).

    Returns:
      `path` as a string.

    Raises:
      ValueError: `path` is an existing file, cannot be created, or cannot be written.

      >>> import tempfile
      >>> writable_dir(tempfile.mkdtemp(), "run_dir") != ""
      True
    """
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{name}={path!r} is an existing file; give a directory path.")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise ValueError(f"{name}={path!r} cannot be created: {e.strerror or e}.") from e
    if not os.access(path, os.W_OK):
        raise ValueError(f"{name}={path!r} is not writable.{' ' + hint if hint else ''}")
    return path


def write_npz(path: str | os.PathLike, arrays: dict, *, compressed: bool = False) -> None:
    """Write `arrays` to the `.npz` file `path` whole or not at all: to a temporary file in the
    same directory, flushed to disk, then renamed over `path` (a crash or a full disk leaves the
    old file or none, never half of one)."""
    import tempfile

    import numpy as np

    path = os.fspath(path)
    fd, tmp = tempfile.mkstemp(
        prefix=".tmp-", suffix=".npz", dir=os.path.dirname(os.path.abspath(path))
    )
    try:
        with os.fdopen(fd, "wb") as f:
            (np.savez_compressed if compressed else np.savez)(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
