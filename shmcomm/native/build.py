"""Building a kernel source into a shared library: once per content hash, cached per user.

The generated translation unit includes ``shmcomm/entry.hpp`` and the user's source, then one
``extern "C"`` trampoline per kernel (see :mod:`shmcomm.native.library`). The key of a build
hashes the unit, the content of every file the preprocessor includes (``-M``), the flags and
the compiler's version, so an edit to any header rebuilds and nothing else does. The cache is
``$XDG_CACHE_HOME/shmcomm/native`` (else ``~/.cache/shmcomm/native``), a directory of mode 0700
that must belong to the user; a build writes to a temporary file and renames it into place
under a per-key lock, so concurrent builds (every rank process loading at once) compile once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from ..errors import ShmcommError

INCLUDE_DIR = Path(__file__).resolve().parent / "include"
BASE_FLAGS = ("-std=c++17", "-O2", "-g", "-fPIC", "-shared", "-pthread", "-Wall", "-Wextra")
_DIAG = re.compile(r"^(?P<file>[^:\s][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)?\s*(?P<kind>fatal error|error|"
                   r"warning|note):")
_versions: dict[str, str] = {}


class NativeBuildError(ShmcommError):
    """The C++ compiler rejected a kernel source; ``diagnostics`` holds its ``file:line``
    messages, ``output`` its whole output."""

    def __init__(self, message: str, diagnostics: list[str] | None = None, output: str = "") -> None:
        self.diagnostics = diagnostics or []
        self.output = output
        super().__init__(message)


def compiler() -> str:
    """The C++ compiler: ``$CXX``, else ``c++`` / ``g++`` / ``clang++`` on the PATH."""
    cxx = os.environ.get("CXX")
    if cxx:
        found = shutil.which(cxx)
        if found is None:
            raise NativeBuildError(f"native: CXX={cxx!r} names no executable on the PATH")
        return found
    for name in ("c++", "g++", "clang++"):
        found = shutil.which(name)
        if found is not None:
            return found
    raise NativeBuildError(
        "native: no C++ compiler found (looked for $CXX, c++, g++, clang++); install one, e.g. "
        "`apt-get install g++` (Debian/Ubuntu) or `dnf install gcc-c++` (Fedora)")


def compiler_version(cxx: str) -> str:
    v = _versions.get(cxx)
    if v is None:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False)
        v = _versions[cxx] = out.stdout + out.stderr
    return v


def cache_dir() -> Path:
    """The user's build cache, made with mode 0700; refused when it belongs to someone else or
    others may write to it (a library loaded from there runs as this user)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    d = Path(root) / "shmcomm" / "native"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(d)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise NativeBuildError(f"native: the build cache {d} is not a directory (a symlink?)")
    if st.st_uid != os.getuid():
        raise NativeBuildError(f"native: the build cache {d} belongs to uid {st.st_uid}, not to you")
    if st.st_mode & 0o022:
        os.chmod(d, 0o700)
    return d


def flags(include_dirs: list[str], defines: list[str], cxxflags: list[str],
          head: list[str] | None = None) -> list[str]:
    """The compiler's flags: the base ones, ``head`` (default: shmcomm's kernel API directory),
    then the user's include directories, defines and flags."""
    out = list(BASE_FLAGS) + (["-I", str(INCLUDE_DIR)] if head is None else list(head))
    for d in include_dirs:
        out += ["-I", d]
    out += [f"-D{d}" for d in defines]
    return out + list(cxxflags)


def _dependencies(cxx: str, fl: list[str], unit: Path) -> list[str]:
    """Every file the unit includes (the preprocessor's own list)."""
    cmd = [cxx, *[f for f in fl if f not in ("-shared", "-g")], "-M", str(unit)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise _build_error(out.stderr, "preprocessing")
    text = out.stdout.replace("\\\n", " ")
    deps = text.split(":", 1)[1].split() if ":" in text else []
    return sorted(set(deps))


def key_of(cxx: str, fl: list[str], unit_text: str, unit: Path) -> str:
    h = hashlib.sha256()
    for part in (compiler_version(cxx), "\0".join(fl), unit_text):
        h.update(part.encode())
        h.update(b"\0")
    for dep in _dependencies(cxx, fl, unit):
        if os.path.abspath(dep) == str(unit):
            continue
        h.update(dep.encode())
        try:
            h.update(Path(dep).read_bytes())
        except OSError:
            h.update(b"<missing>")
    return h.hexdigest()[:32]


def _build_error(stderr: str, what: str) -> NativeBuildError:
    diags = [ln for ln in stderr.splitlines() if _DIAG.match(ln)]
    errors = [d for d in diags if " error:" in d or "fatal error:" in d] or diags
    head = "\n".join(errors[:20]) if errors else stderr.strip()[-2000:]
    return NativeBuildError(f"native: {what} failed:\n{head}", errors, stderr)


def build(unit_text: str, fl: list[str], cxx: str | None = None) -> tuple[Path, bool]:
    """The shared library of ``unit_text`` built with ``fl`` by ``cxx`` (default:
    :func:`compiler`): (its path, whether this call compiled it). Compiles only when the cache
    has no library of this key."""
    cxx = cxx or compiler()
    d = cache_dir()
    fd, tmp_unit = tempfile.mkstemp(dir=d, prefix="unit-", suffix=".cpp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(unit_text)
        key = key_of(cxx, fl, unit_text, Path(tmp_unit))
        lib = d / f"{key}.so"
        if lib.exists():
            return lib, False
        with open(d / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent builds of one key: one compiles
            if lib.exists():
                return lib, False
            unit = d / f"{key}.cpp"  # kept beside the library: what gdb shows
            os.replace(tmp_unit, unit)
            fd2, tmp_lib = tempfile.mkstemp(dir=d, prefix=f"{key}-", suffix=".so.tmp")
            os.close(fd2)
            try:
                out = subprocess.run([cxx, *fl, str(unit), "-o", tmp_lib], capture_output=True,
                                     text=True, check=False)
                if out.returncode != 0:
                    raise _build_error(out.stderr, "compiling")
                os.chmod(tmp_lib, 0o700)
                os.replace(tmp_lib, lib)
            finally:
                if os.path.exists(tmp_lib):
                    os.unlink(tmp_lib)
        return lib, True
    finally:
        if os.path.exists(tmp_unit):
            os.unlink(tmp_unit)
