"""Native kernels: PTO C++ kernels built with the system compiler and run on shmcomm's blocks.

::

    lib = shmcomm.native.load("kernels.cpp")             # compiled once, cached per content hash

    def host(rt):
        rt.launch(lib.DeviceBarrierKernel, blocks=4,
                  args=(rt.device_context, rt.signal_base, 0))

Each ``__global__ AICORE void K(...)`` of the source is ``lib.K``; a template kernel is
``lib.kernel("K<float, 256>")``. A launch calls the kernel on every block thread through its C
entry point with the GIL released, so the blocks of a native kernel run truly in parallel.
Arguments: ``rt.device_context`` for a pointer to a device context (any struct laid out as
pto-isa's ``CommDeviceContext``, whatever its name), ``GMPtr`` s (``x.ptr``, ``rt.signal_base``)
for other pointers (a struct of another layout: build it in a window with :func:`place`), Python
numbers for scalars; a wrong count or kind raises ``ArgumentError`` naming the parameter.
The kernel API (``shmcomm/pto.hpp``, also reachable as ``<pto/pto-inst.hpp>`` and
``"pto/comm/pto_comm_inst.hpp"``) is found by the loader. See the documentation page "Native
kernels" for what each mode sees.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..core.agent import FLAGS, current
from ..core.gm import GMPtr
from ..errors import ArgumentError, ShmcommError
from . import bridge, ptoisa, sites
from . import build as B
from .build import INCLUDE_DIR, NativeBuildError
from .context import NativeDeviceContext, device_context, place, window_bases
from .library import KINDS, Loaded, discover, parse_instance, unit

SPIN = 64  # polls of a failed native TWAIT before it registers its wait and yields, then sleeps
_ERRLEN = 2048


class NativeKernelError(ShmcommError):
    """A native kernel threw a C++ exception; the message names the kernel's last
    instruction's ``file:line``."""


class NativeKernel:
    """One kernel of a loaded library (``lib.K``): pass it to ``rt.launch``."""

    def __init__(self, lib: NativeLibrary, name: str, entry: Any, kinds: str, loaded: Loaded) -> None:
        self.lib, self.name, self._entry, self.kinds = lib, name, entry, kinds
        self._loaded = loaded
        self.__name__ = name  # reports and reprs name the launch's kernel

    def _words(self, args: tuple) -> Any:
        kinds = self.kinds
        if len(args) != len(kinds):
            want = ", ".join(KINDS.get(k, "?") for k in kinds) or "none"
            raise ArgumentError(f"{self.name}: takes {len(kinds)} argument(s) ({want}), got {len(args)}")
        words = (ctypes.c_uint64 * max(len(args), 1))()
        for i, (k, v) in enumerate(zip(kinds, args, strict=True)):
            words[i] = self._word(i, k, v)
        return words

    def _word(self, i: int, kind: str, v: Any) -> int:
        where = f"{self.name}: argument {i}"
        if kind == "c":
            if not isinstance(v, NativeDeviceContext):
                raise ArgumentError(f"{where} is a DeviceContext*: pass rt.device_context, "
                                    f"got {type(v).__name__}")
            return v.address
        if kind == "s":
            if isinstance(v, NativeDeviceContext):
                raise ArgumentError(f"{where} points to a struct of the kernel's own, not laid out as "
                                    "rt.device_context (pto-isa's CommDeviceContext): build it in a window "
                                    "(shmcomm.native.place) and pass its GMPtr")
            kind = "p"
        if kind == "p":
            if isinstance(v, NativeDeviceContext):
                return v.address
            ptr = getattr(v, "ptr", v) if not isinstance(v, GMPtr) else v
            if not isinstance(ptr, GMPtr):
                raise ArgumentError(f"{where} is a pointer: pass a GMPtr (x.ptr), got {type(v).__name__}")
            return _address(ptr)
        if kind == "i":
            if isinstance(v, float) or not isinstance(v, int) and not hasattr(v, "__index__"):
                raise ArgumentError(f"{where} is an integer, got {type(v).__name__}")
            iv = int(v)
            if not -(1 << 63) <= iv < 1 << 64:
                raise ArgumentError(f"{where}: {iv} does not fit 64 bits")
            return iv & ((1 << 64) - 1)
        if kind == "f":
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise ArgumentError(f"{where} is a float, got {type(v).__name__}")
            return int.from_bytes(ctypes.c_double(float(v)), "little")
        raise ArgumentError(f"{where}: a parameter type shmcomm cannot pass (a struct by value?)")

    def __call__(self, ctx: Any, *args: Any) -> None:
        agent = current()
        self._loaded.note_waits()
        words = self._words(args)
        block = _block_of(agent)
        err = ctypes.create_string_buffer(_ERRLEN)
        rc = self._entry(ctypes.addressof(block), ctypes.addressof(words), err, _ERRLEN)
        if rc == 2:
            exc = bridge.pending()
            if exc is not None:
                raise exc
            raise NativeKernelError(f"{self.name}: a bridged instruction failed on {agent.where()}")
        if rc != 0:
            where = sites.message(err.value)
            raise NativeKernelError(f"{self.name} on {agent.where()}: C++ exception after the "
                                    f"instruction at {where}")

    def __repr__(self) -> str:
        return f"<native kernel {self.name}({self.kinds}) from {self.lib.source.name}>"


def _address(ptr: GMPtr) -> int:
    return _bases_of(ptr.kind.windows)[ptr.rank] + ptr.offset


def address(ptr: Any) -> int:
    """The address in this rank process of a GM pointer (``x.ptr``, or ``x`` itself): what a
    native kernel sees for it, e.g. to fill a pointer member of a struct built with
    :func:`place`."""
    p = getattr(ptr, "ptr", ptr) if not isinstance(ptr, GMPtr) else ptr
    if not isinstance(p, GMPtr):
        raise ArgumentError(f"native.address: pass a GMPtr (x.ptr), got {type(ptr).__name__}")
    return _address(p)


_bases: dict[int, tuple[Any, list[int]]] = {}


def _bases_of(windows: Any) -> list[int]:
    got = _bases.get(id(windows))
    if got is None or got[0] is not windows:
        got = _bases[id(windows)] = (windows, window_bases(windows))
    return got[1]


def _block_of(agent: Any) -> bridge.Block:
    """The C view of the calling block (made once per block of a launch)."""
    rt = agent.rt
    bases = _bases_of(rt.windows)
    arr = (ctypes.c_uint64 * len(bases))(*bases)
    b = bridge.Block()
    b.block_idx, b.block_num = agent.block_idx, agent.block_num
    b.rank, b.nranks = rt.rank, rt.nranks
    b.bridged = int(agent.hooks is not None or agent.fences is not None)
    b.spin = SPIN
    b.set_read_add = int(FLAGS.read_add)  # pto-isa's proposed Set (read, then add): shmcomm's
    if agent.policy == "adaptive" and not agent.is_host:  # the other policies: shmcomm's own wait
        ctl = rt.ctl
        b.line = ctl.agent_addr(rt.rank, agent.slot)
        b.active_word = ctl.active_addr
        b.ncores = ctl.ncores
        b.t0_ns = int(ctl.t0 * 1e9)
        b.timeout_ns = int(min(agent.wait_timeout, 1e9) * 1e9)
    b.abort_word = rt.ctl.abort_addr
    b.win_size = rt.windows.size
    b.bases = ctypes.addressof(arr)
    b.op = bridge.OP_CALLBACK
    _keep.block, _keep.bases = b, arr  # alive while the kernel runs on this thread
    return b


_keep = threading.local()


class NativeLibrary:
    """A loaded kernel source: ``lib.K`` for each kernel, ``lib.kernel("K<...>")`` for a
    template instantiation. Built once per content hash; ``built`` tells whether the last
    build compiled (False: the cache had it)."""

    def __init__(self, source: Path, flags: list[str], pto_isa: Path | None = None,
                 cxx: str | None = None) -> None:
        self.source = source
        self.flags = flags
        self.pto_isa = pto_isa  # the checkout's include/ directory of a pto-isa build
        self._cxx = cxx
        self._text = ptoisa.kernel_text(source) if pto_isa is not None else None
        self.found = discover(source.read_text())
        if not self.found:
            raise ArgumentError(f"native.load: {source} defines no `__global__ ... void NAME(` kernel")
        self._names = [n for n, tpl in self.found.items() if not tpl]
        self._kernels: dict[str, NativeKernel] = {}
        self._lock = threading.Lock()
        self.built = False
        self._build(self._names)

    def _build(self, names: list[str]) -> None:
        path, self.built = B.build(unit(self.source, names, self._text), self.flags, self._cxx)
        loaded = Loaded(path, names)
        self.path = path
        for name, (entry, kinds) in loaded.entries.items():
            if "?" in kinds:
                raise ArgumentError(f"native: kernel {name} has a parameter type shmcomm cannot pass "
                                    f"(kinds {kinds!r}: pointers, integers and floats only)")
            self._kernels[name] = NativeKernel(self, name, entry, kinds, loaded)
        self._names = names

    @property
    def kernels(self) -> list[str]:
        """Every kernel of the source (template kernels by bare name)."""
        return list(self.found)

    def kernel(self, spec: str) -> NativeKernel:
        """The kernel ``spec``: a name, or a template instantiation such as ``"K<float, 256>"``
        (built on first use, then cached)."""
        name, targs = parse_instance(spec)
        if name not in self.found:
            raise ArgumentError(f"native: {self.source.name} has no kernel {name!r} "
                                f"(kernels: {', '.join(self.found)})")
        if self.found[name] and not targs:
            raise ArgumentError(f"native: {name} is a template kernel: name its arguments, "
                                f"e.g. lib.kernel(\"{name}<...>\")")
        key = name + targs
        with self._lock:
            k = self._kernels.get(key)
            if k is None:
                self._build(self._names + [key])
                k = self._kernels[key]
        return k

    def __getattr__(self, name: str) -> NativeKernel:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.kernel(name)

    def __repr__(self) -> str:
        return f"<native library {self.source.name}: {', '.join(self.found)}>"


def _strings(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        return [str(value)]
    if not isinstance(value, Iterable):
        raise ArgumentError(f"native.load: {what} must be a list of str, got {type(value).__name__}")
    out = []
    for v in value:
        if not isinstance(v, (str, os.PathLike)):
            raise ArgumentError(f"native.load: {what} must be a list of str, got an item {v!r}")
        out.append(str(v))
    return out


def load(source: str | os.PathLike, include_dirs: Any = None, defines: Any = None,
         cxxflags: Any = None, kernels: Any = None, pto_isa: Any = None) -> NativeLibrary:
    """Build ``source`` (a C++ file of ``__global__`` kernels) and load it.

    ``include_dirs`` are added with ``-I``, ``defines`` (``"NAME"`` or ``"NAME=VALUE"``, or a
    dict) with ``-D``, ``cxxflags`` appended as given. The build is cached by content (source,
    every included header, flags, compiler version) in ``$XDG_CACHE_HOME/shmcomm/native``;
    ``kernels`` names template instantiations to build at once. Raises
    :class:`NativeBuildError` with the compiler's ``file:line`` messages when it fails.

    ``pto_isa`` is the path of a pto-isa checkout (``True``: the one ``$SHMCOMM_PTO_ISA``
    names; default: none, shmcomm's own kernel API): the kernel is built against the
    checkout's own headers with ``-D__CPU_SIM``, behind shmcomm's shadow of its comm and sync
    instructions (see :mod:`shmcomm.native.ptoisa`), once :func:`shmcomm.native.ptoisa.check`
    has verified the checkout's declarations.
    """
    if not isinstance(source, (str, os.PathLike)):
        raise ArgumentError(f"native.load: source must be a path, got {type(source).__name__}")
    path = Path(source).resolve()
    if not path.is_file():
        raise ArgumentError(f"native.load: source {str(source)!r} is no file")
    if isinstance(defines, dict):
        defines = [f"{k}={v}" if v is not None else str(k) for k, v in defines.items()]
    dirs = [str(Path(d).resolve()) for d in _strings(include_dirs, "include_dirs")]
    if pto_isa is True:  # the checkout the environment names
        pto_isa = os.environ.get(ptoisa.ENV)
        if not pto_isa:
            raise ArgumentError(f"native.load: pto_isa=True takes the pto-isa checkout from ${ptoisa.ENV}, "
                                "which is not set")
    if pto_isa is None or pto_isa is False:
        flags = B.flags(dirs, _strings(defines, "defines"), _strings(cxxflags, "cxxflags"))
        lib = NativeLibrary(path, flags)
    else:
        if not isinstance(pto_isa, (str, os.PathLike)):
            raise ArgumentError(f"native.load: pto_isa must be the path of a pto-isa checkout, got "
                                f"{type(pto_isa).__name__}")
        inc = ptoisa.check(pto_isa)
        flags = B.flags(dirs, _strings(defines, "defines"), _strings(cxxflags, "cxxflags"),
                        head=ptoisa.flags(inc, path.parent))
        lib = NativeLibrary(path, flags, inc, ptoisa.pick_compiler(inc))
    for spec in _strings(kernels, "kernels"):
        lib.kernel(spec)
    return lib


PtoIsaMismatch = ptoisa.PtoIsaMismatch

__all__ = ["load", "NativeLibrary", "NativeKernel", "NativeKernelError", "NativeBuildError", "PtoIsaMismatch",
           "NativeDeviceContext", "device_context", "place", "address", "INCLUDE_DIR"]
