"""Building a kernel against a user's pto-isa checkout, behind shmcomm's shadow include tree.

The kernel is compiled with ``-D__CPU_SIM``, with ``shadow/`` (shmcomm's own files at pto-isa's
include paths) ahead of the checkout's ``include/``: pto-isa's tile library runs natively, and
its comm instructions are shmcomm's: ``pto/cpu/comm/{TNotify,TWait,TTest,TPut,TGet}.hpp`` (the
asynchronous SDMA copies too), the root collectives ``pto/cpu/comm/{TBroadcast,TScatter,
TGather,TReduce}.hpp``, ``AsyncEvent::Wait`` / ``Test`` (``pto/cpu/TPrefetchAsync.hpp``, which
also gains a2a3's ``BuildAsyncSession``), the sync part of ``pto/common/cpu_stub.hpp`` and the
AtomicAdd lock of ``pto/cpu/atomic.hpp`` (one per run, shared by the rank processes, not one per
process). Each shadow file includes pto-isa's own file with the replaced names renamed away
(``#include_next``), so nothing of pto-isa is copied; it therefore depends on the checkout's
declarations, which :func:`check` verifies before a build.

A kernel file of pto-isa's a2a3 suites mixes kernels with host code (ACL / HCCL calls,
``<<<>>>`` launches) and includes its suite's ``common.hpp``. shmcomm compiles such a file
unchanged, treated mechanically in the generated unit (the file itself is never edited):

* every top-level function (not ``__global__``) whose body contains a ``<<<`` launch is host
  code, and so is every top-level function, type or statement that names the suite's host
  harness (what its ``common.hpp`` and the headers beside it declare, less shmcomm's shim and
  what device code uses, and the ACL runtime's ``acl*`` / ``ACL_*`` names) or names host code
  (calls, explicit instantiations, types and aliases of host code, to a fixpoint); device code
  (the kernels and every item they name, to a fixpoint) never is: host code's text is blanked
  (newlines kept, so every line number of the file stays);
* ``#include "...common.hpp"`` (the suite's host harness) becomes shmcomm's shim, which gives
  the device side of it (``CommRemotePtr`` over the rank's windows);
* ``#line`` keeps the file's own name, so diagnostics and reports name the user's file and line;
* ahead of it, ``<pto/pto-inst.hpp>`` and then ``__CCE_AICORE__`` (a2a3's value, 220) are
  defined as for bisheng's device pass, so a file's ``#ifdef __CCE_AICORE__`` device code is
  compiled and its ``#ifndef PIPE_FIX``-style fallbacks see pto-isa's pipes (:data:`PRELUDE`);
* a device-side HCCL name that pto-isa's CPU stub declares as a stand-in (``CommDeviceContext``,
  ``HCCL_MAX_RANK_NUM``: :data:`KERNEL_OWNED`) and that the kernel file, or a header it includes
  from its own directory, defines itself (as an NPU kernel must: the NPU toolchain has none) is
  the kernel's: the unit defines ``SHMCOMM_KERNEL_OWNS_<name>`` first of all (before the prelude
  includes the stub) and the shadow ``cpu_stub.hpp`` renames pto-isa's stand-in away, so the
  two definitions do not clash.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from ..errors import ShmcommError
from .build import INCLUDE_DIR, NativeBuildError, compiler, compiler_version

SHADOW_DIR = Path(__file__).resolve().parent / "shadow"
CHECKED_AGAINST = "3186c381"  # the pto-isa commit the shadow's declarations were written for
ENV = "SHMCOMM_PTO_ISA"



def _async(op: str) -> tuple[str, ...]:
    """pto-isa's CPU ``TPUT_ASYNC_IMPL`` / ``TGET_ASYNC_IMPL``, without and with a peer."""
    head = (f"template <DmaEngine engine{{}}, typename GlobalDstData, typename GlobalSrcData> PTO_INTERNAL "
            f"AsyncEvent {op}_ASYNC_IMPL(GlobalDstData& dst, GlobalSrcData& src, const AsyncSession& session")
    return head.format(" = DmaEngine::SDMA") + ")", head.format("") + ", uint32_t peer)"


def _collective(op: str, data: str) -> tuple[str, ...]:
    """pto-isa's CPU ``<op>_IMPL`` of a root collective: the staging-tile and the ping-pong form."""
    g = data.split("&")[0]
    head = (f"template <typename ParallelGroupType, typename {g}, typename TileData> PTO_INTERNAL void "
            f"{op}_IMPL(ParallelGroupType& parallelGroup, {data}, ")
    return head + "TileData& stagingTileData)", head + "TileData& pingTile, TileData& pongTile)"


# file (under include/) -> the declarations the shadow renames and replaces, whitespace-free
EXPECTED: dict[str, tuple[str, ...]] = {
    "pto/common/cpu_stub.hpp": (
        "inline void pipe_barrier(pipe_t pipe)",
        "inline void set_flag(pipe_t, pipe_t, int)", "inline void wait_flag(pipe_t, pipe_t, int)",
        "inline void dsb(mem_dsb_t)", "inline void dcci(const volatile void*, int)",
        "inline void dcci(const volatile void*, int, int)", "inline uint32_t get_block_idx()",
        "inline uint32_t get_block_num()", "inline void SYNCALL_IMPL()",
        "inline void SYNCALL_SOFT_IMPL(int32_t* gmWorkspace, int32_t usedCores)",
        "inline void SYNCALL_SOFT_AIC_IMPL(int32_t* gmWorkspace, int32_t usedCores)",
        "inline void SYNCALL_SOFT_MIX_IMPL(int32_t* gmWorkspace, int32_t usedCores)",
        "static constexpr uint32_t HCCL_MAX_RANK_NUM = 64;", "struct CommDeviceContext {"),
    "pto/cpu/atomic.hpp": ("PTO_INTERNAL std::mutex& AtomicAddMutex()",),
    "pto/cpu/comm/TNotify.hpp": (
        "template <typename GlobalSignalData> PTO_INTERNAL void TNOTIFY_IMPL("
        "GlobalSignalData& dstSignalData, int32_t value, NotifyOp op)",),
    "pto/cpu/comm/TWait.hpp": (
        "template <typename GlobalSignalData> inline void TWAIT_IMPL(GlobalSignalData& signalData, "
        "int32_t cmpValue, comm::WaitCmp cmp)",),
    "pto/cpu/comm/TTest.hpp": (
        "template <typename GlobalSignalData> PTO_INTERNAL bool TTEST_IMPL("
        "GlobalSignalData& signalData, int32_t cmpValue, WaitCmp cmp)",),
    "pto/cpu/comm/TPut.hpp": (
        "template <typename GlobalDstData, typename GlobalSrcData, typename TileData, AtomicType atomicType> "
        "PTO_INTERNAL void TPUT_IMPL(GlobalDstData& dst, GlobalSrcData& src, TileData& src1)",
        "template <typename GlobalDstData, typename GlobalSrcData, typename TileData, AtomicType atomicType> "
        "PTO_INTERNAL void TPUT_IMPL(GlobalDstData& dst, GlobalSrcData& src, "
        "TileData& ping, TileData& pong)",
        *_async("TPUT")),
    "pto/cpu/TLoad.hpp": (
        "template <typename TileData, typename GlobalData> PTO_INTERNAL void TLOAD_IMPL("
        "TileData& dst, GlobalData& src)",),
    "pto/cpu/TStore.hpp": (
        "template <typename TileData, typename GlobalData, AtomicType atomicType, "
        "STPhase Phase = STPhase::Unspecified> PTO_INTERNAL void TSTORE_IMPL(GlobalData& dst, TileData& src)",
        "template <typename TileData, typename GlobalData, AtomicType atomicType, ReluPreMode reluPreMode, "
        "STPhase Phase = STPhase::Unspecified>",
        "void TSTORE_IMPL(GlobalData& dst, TileData& src, uint64_t preQuantScalar)",
        "template <typename TileData, typename GlobalData, typename FpTileData, AtomicType atomicType, "
        "ReluPreMode reluPreMode, STPhase Phase = STPhase::Unspecified>",
        "void TSTORE_IMPL(GlobalData& dst, TileData& src, FpTileData& fp)"),
    "pto/cpu/comm/TGet.hpp": (
        "template <typename GlobalDstData, typename GlobalSrcData, typename TileData> "
        "PTO_INTERNAL void TGET_IMPL(GlobalDstData& dst, GlobalSrcData& src, TileData& src1)",
        "template <typename GlobalDstData, typename GlobalSrcData, typename TileData> "
        "PTO_INTERNAL void TGET_IMPL(GlobalDstData& dst, GlobalSrcData& src, "
        "TileData& ping, TileData& pong)",
        *_async("TGET")),
    "pto/cpu/TPrefetchAsync.hpp": (
        "PTO_INTERNAL bool AsyncEvent::Wait(const AsyncSession& /*session*/) const",
        "PTO_INTERNAL bool AsyncEvent::Test(const AsyncSession& /*session*/) const"),
    "pto/cpu/comm/TBroadcast.hpp": _collective("TBROADCAST", "GlobalSrcData& srcGlobalData"),
    "pto/cpu/comm/TScatter.hpp": _collective("TSCATTER", "GlobalSrcData& srcGlobalData"),
    "pto/cpu/comm/TGather.hpp": _collective("TGATHER", "GlobalDstData& dstGlobalData"),
    "pto/cpu/comm/TReduce.hpp": (
        "template <typename ParallelGroupType, typename GlobalDstData, typename TileData> "
        "PTO_INTERNAL void TREDUCE_IMPL(ParallelGroupType& parallelGroup, GlobalDstData& dstGlobalData, "
        "TileData& accTileData, TileData& recvTileData, pto::comm::ReduceOp op)",
        "template <typename ParallelGroupType, typename GlobalDstData, typename TileData> "
        "PTO_INTERNAL void TREDUCE_IMPL(ParallelGroupType& parallelGroup, GlobalDstData& dstGlobalData, "
        "TileData& accTileData, TileData& pingTile, TileData& pongTile, pto::comm::ReduceOp op)"),
}
# compilers that accept `static_assert(false)` in a template (P2593), which pto-isa's
# include/pto/cpu/TReduceIdx.hpp uses: tried in this order when $CXX is not set
GOOD_COMPILERS = ("clang++-21", "clang++-20", "clang++-19", "clang++-18", "clang++-17",
                  "g++-15", "g++-14", "g++-13")
_WS = re.compile(r"\s+")
_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_NAME = re.compile(r"([A-Za-z_]\w*)\s*\(")  # a function's name: the first one before a '('
# Ahead of the kernel file: <cstdint> and <cstddef> (pto-isa's kernel CMake files pre-include
# stdint.h and stddef.h), pto-isa's CPU build of the kernel API (so the file may use its names
# and pipes before including anything), then `__CCE_AICORE__` as a2a3's device pass defines it,
# so code guarded by `#ifdef __CCE_AICORE__` (the device side of a kernel file) is compiled;
# pto-isa's headers, already read, keep their CPU-simulation branches.
PRELUDE = "#include <cstddef>\n#include <cstdint>\n#include <pto/pto-inst.hpp>\n#define __CCE_AICORE__ 220\n"
# device-side HCCL names pto-isa's CPU stub declares in place of the NPU host's, which an NPU
# kernel's own headers define: name -> how a definition of it reads (comments removed)
KERNEL_OWNED: dict[str, re.Pattern[str]] = {
    "CommDeviceContext": re.compile(r"\b(?:struct|class)\s+CommDeviceContext\b[^;{}()]*\{"),
    "HCCL_MAX_RANK_NUM": re.compile(r"\bconst(?:expr)?\b[^;{}()]*\bHCCL_MAX_RANK_NUM\s*(?:=(?!=)|\{)"),
}
_QUOTED = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


class PtoIsaMismatch(ShmcommError):
    """The pto-isa checkout's declarations differ from those shmcomm's shadow replaces."""


def _squash(text: str) -> str:
    return _WS.sub("", _COMMENTS.sub(" ", text))


def check(root: str | os.PathLike) -> Path:
    """The checkout's ``include/`` directory, once every file the shadow replaces declares
    what the shadow was written for; raises :class:`PtoIsaMismatch` naming the file and the
    declaration otherwise."""
    base = Path(root).expanduser().resolve()
    inc = base / "include"
    if not (inc / "pto" / "pto-inst.hpp").is_file():
        raise PtoIsaMismatch(f"pto_isa: {str(root)!r} is no pto-isa checkout (no include/pto/pto-inst.hpp)")
    for rel, decls in EXPECTED.items():
        f = inc / rel
        if not f.is_file():
            raise PtoIsaMismatch(f"pto_isa: {f} is missing; shmcomm's shadow replaces it (written for "
                                 f"pto-isa {CHECKED_AGAINST})")
        text = _squash(f.read_text(errors="replace"))
        for d in decls:
            if _squash(d) not in text:
                raise PtoIsaMismatch(
                    f"pto_isa: {f} does not declare `{d}`, which shmcomm's shadow replaces (written for "
                    f"pto-isa {CHECKED_AGAINST}): this checkout's signatures differ")
    return inc


def _rejects_static_assert_false(cxx: str) -> bool:
    v = compiler_version(cxx)
    m = re.search(r"clang version (\d+)", v)
    if m:
        return int(m.group(1)) < 17
    m = re.search(r"\(GCC\)\s*(\d+)|g\+\+.*?\s(\d+)\.\d+\.\d+", v)
    if m:
        return int(m.group(1) or m.group(2)) < 13
    return False


def pick_compiler(inc: Path) -> str:
    """$CXX if set, else a compiler that reads pto-isa's headers as they are. A checkout whose
    TReduceIdx.hpp uses `static_assert(false)` needs GCC 13 or Clang 17: with only an older
    one, a :class:`NativeBuildError` says what to install (the checkout is never patched)."""
    if os.environ.get("CXX"):
        cxx = compiler()
    else:
        found = next((shutil.which(c) for c in GOOD_COMPILERS if shutil.which(c)), None)
        cxx = found or compiler()
    tri = inc / "pto" / "cpu" / "TReduceIdx.hpp"
    if tri.is_file() and "static_assert(false" in _squash(tri.read_text(errors="replace")) \
            and _rejects_static_assert_false(cxx):
        first = compiler_version(cxx).splitlines()[0] if compiler_version(cxx) else cxx
        raise NativeBuildError(
            f"pto_isa: {cxx} ({first}) rejects {tri}: `static_assert(false)` in a template needs GCC 13 "
            "or Clang 17; install one (Debian 12: `apt-get install clang-19`) and set CXX=clang++-19, or "
            "leave CXX unset and shmcomm picks it")
    return cxx


def flags(inc: Path, origin: Path) -> list[str]:
    """Flags after the base ones: the shadow ahead of the checkout (a system directory: its
    warnings are the checkout's, not the kernel's), shmcomm's runtime headers last; quoted
    includes of the kernel's own directory still resolve there."""
    return ["-std=c++20", "-D__CPU_SIM", "-I", str(SHADOW_DIR), "-isystem", str(inc), "-idirafter",
            str(INCLUDE_DIR), "-iquote", str(origin)]


def _blocks(text: str, start: int, end: int,
            stmts: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """Top-level brace blocks of text[start:end] (comments, strings, preprocessor lines
    skipped): (start of the declaration before the block, its '{', its '}'); the bodies of
    namespaces and `extern "C"` are searched in turn. Top-level statements ending in ';' go to
    ``stmts`` as (start, end)."""
    out: list[tuple[int, int, int]] = []
    i, decl, depth, open_at = start, start, 0, -1
    while i < end:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = end if i < 0 else i
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = end if j < 0 else j + 2
            continue
        if c in "\"'":
            j = i + 1
            while j < end and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c == "#" and depth == 0 and text[text.rfind("\n", 0, i) + 1:i].strip() == "":
            while True:  # a preprocessor line (with its continuations)
                j = text.find("\n", i)
                if j < 0 or text[j - 1] != "\\":
                    break
                i = j + 1
            i = end if j < 0 else j
            decl = i
            continue
        if c == "{":
            if depth == 0:
                open_at = i
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                head = text[decl:open_at]
                if re.search(r"\bnamespace\b|extern\s*\"C\"", head) and "(" not in head:
                    out += _blocks(text, open_at + 1, i, stmts)
                else:
                    out.append((decl, open_at, i))
                decl = i + 1
        elif c == ";" and depth == 0:
            stmts.append((decl, i))
            decl = i + 1
        i += 1
    return out


def _own_sources(source: Path) -> list[str]:
    """The kernel file and the headers it includes with quotes from its own directory tree
    (recursively; the suite's ``common.hpp`` is shmcomm's shim), comments removed."""
    out: list[str] = []
    seen: set[Path] = set()
    todo = [source.resolve()]
    top = source.resolve().parent
    while todo:
        f = todo.pop()
        if f in seen or not f.is_file():
            continue
        seen.add(f)
        text = _COMMENTS.sub(" ", f.read_text(errors="replace"))
        out.append(text)
        for inc in _QUOTED.findall(text):
            dep = (f.parent / inc).resolve()
            if dep.name != "common.hpp" and dep.is_relative_to(top):
                todo.append(dep)
    return out


def kernel_owned(source: Path) -> list[str]:
    """The names of :data:`KERNEL_OWNED` the kernel's own sources define."""
    texts = _own_sources(source)
    return [name for name, pat in KERNEL_OWNED.items() if any(pat.search(t) for t in texts)]


_HARNESS = re.compile(r'^\s*#\s*include\s*"((?:[^"]*/)?common\.hpp)"', re.M)
# declarations a harness header makes: macros, types, aliases, constants, functions (by the
# name before their parameter list)
_DECLS = re.compile(r"^\s*#\s*define\s+(\w+)|\b(?:struct|class|union|enum(?:\s+class)?)\s+(\w+)\s*(?:[{:;]|$)"
                    r"|\busing\s+(\w+)\s*=|\b(\w+)\s*=|\b(\w+)\s*\(", re.M)
_ACL = re.compile(r"\b(?:acl[a-z]*[A-Z]\w*|ACL_\w+)\b")  # the ACL runtime: host-only by definition
_IDENT = re.compile(r"[A-Za-z_]\w*")
_ITEM = re.compile(r"\b(?:struct|class|union)\s+(\w+)|\busing\s+(\w+)\s*=")


def _declared(first: Path) -> set[str]:
    """What a header declares at top level, with the headers it includes from its own directory."""
    names: set[str] = set()
    files, seen = [first.resolve()], set()
    while files:
        f = files.pop()
        if f in seen or not f.is_file():
            continue
        seen.add(f)
        body = _COMMENTS.sub(" ", f.read_text(errors="replace"))
        files += [(f.parent / q).resolve() for q in _QUOTED.findall(body)]
        stmts: list[tuple[int, int]] = []
        heads = [body[d:o] for d, o, _ in _blocks(body, 0, len(body), stmts)]
        heads += [body[a:b] for a, b in stmts]
        heads += re.findall(r"^\s*#\s*define\s+\w+", body, re.M)
        for h in heads:
            m = _DECLS.search(h)
            if m is not None:
                names.add(next(g for g in m.groups() if g))
    return names


def _harness_names(source: Path, text: str) -> set[str]:
    """What the suite's host harness declares at top level (its ``common.hpp`` and the headers it
    includes from its own directory: ACL / HCCL contexts, MPI shims), less the device side
    shmcomm's shim of it provides (``CommRemotePtr``)."""
    names: set[str] = set()
    for m in _HARNESS.finditer(text):
        names |= _declared(source.parent / m.group(1))
    return names - _declared(SHADOW_DIR / "shmcomm_shadow" / "a2a3_common.hpp")


def kernel_text(source: Path) -> str:
    """The user's kernel file as the generated unit compiles it (see the module's docstring)."""
    text = source.read_text()
    # top-level items that are not kernels: (name, declaration start, end, text without comments)
    items: list[tuple[str, int, int, str]] = []
    kernels = []
    stmts: list[tuple[int, int]] = []
    for decl, open_at, close in _blocks(text, 0, len(text), stmts):
        head = _COMMENTS.sub(" ", text[decl:open_at])
        body = _COMMENTS.sub(" ", text[decl:close + 1])
        if "__global__" in head:
            kernels.append(body)
            continue
        m = _ITEM.search(head) if "(" not in head else None
        f = _NAME.search(head) if m is None else None
        name = (m.group(1) or m.group(2)) if m is not None else (f.group(1) if f is not None else "")
        items.append((name, decl, close, body))
    for a, b in stmts:
        body = _COMMENTS.sub(" ", text[a:b + 1])
        m = _ITEM.search(body)
        items.append(((m.group(1) or m.group(2)) if m is not None else "", a, b, body))
    # device code: the kernels and every item they name, to a fixpoint; never host code
    words = [set(_IDENT.findall(body)) - {name} for name, _, _, body in items]
    used = {w for k in kernels for w in _IDENT.findall(k)}
    device: set[int] = set()
    while True:
        more = {i for i, (name, *_) in enumerate(items) if name and name in used and i not in device}
        if not more:
            break
        device |= more
        for i in more:
            used |= words[i]
    # host code: what launches a kernel (<<<), what names the host harness (what the harness
    # declares that device code does not use, and the ACL runtime), and what names host code
    harness = _harness_names(source, text) - used
    host = {i for i, (_, _, _, body) in enumerate(items) if i not in device
            and ("<<<" in body or words[i] & harness or _ACL.search(body))}
    while True:
        names = {items[i][0] for i in host if items[i][0]}
        more = {i for i in range(len(items)) if i not in host and i not in device and words[i] & names}
        if not more:
            break
        host |= more
    chars = list(text)
    for i in host:
        _, a, b, _ = items[i]
        m = re.compile(r"\s*;").match(text, b + 1)  # the ';' closing a type's definition
        b = m.end() - 1 if m is not None and text[b] == "}" else b
        for k in range(a, b + 1):
            if chars[k] != "\n":
                chars[k] = " "
    out = "".join(chars)
    out = re.sub(r'^(\s*#\s*include\s*)"(?:[^"]*/)?common\.hpp"', r'\1"shmcomm_shadow/a2a3_common.hpp"', out,
                 flags=re.M)
    # the kernel-owned names first: the prelude includes pto-isa's CPU stub, which reads them
    owns = "".join(f"#define SHMCOMM_KERNEL_OWNS_{name} 1\n" for name in kernel_owned(source))
    return f'{owns}{PRELUDE}#line 1 "{source}"\n{out}\n'
