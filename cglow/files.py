"""The files a command writes: all of them whole, or none."""
from __future__ import annotations

import os
from pathlib import Path
import tempfile

from .errors import CglowError


def write_files(files: dict[Path, str | bytes]) -> None:
    """Write every file through a temporary file in its folder and rename them only when all are written,
    so that a failure never leaves half a file (nor some of the files). The files get the usual mode (0666
    less the umask), not mkstemp's 0600."""
    temporary: list[str] = []
    umask = os.umask(0)
    os.umask(umask)
    try:
        for path, content in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
            temporary.append(tmp)
            os.fchmod(fd, 0o666 & ~umask)
            with os.fdopen(fd, "wb") as f:
                f.write(content if isinstance(content, bytes) else content.encode())
        for tmp, path in zip(temporary, files):
            os.replace(tmp, path)
    except OSError as exc:
        raise CglowError(f"cannot write {exc.filename or 'the output'}: {exc.strerror or exc}") from None
    finally:
        for tmp in temporary:
            if os.path.exists(tmp):
                os.unlink(tmp)
