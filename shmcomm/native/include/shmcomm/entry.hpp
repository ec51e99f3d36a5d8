// The C entry points shmcomm.native generates for each kernel: they unpack a launch's argument
// words with the kernel's own parameter types, run it on the calling block thread, and turn a
// C++ exception into an error text (an exception must never unwind into Python). Included by
// the generated translation unit only.
#pragma once

#include <cerrno>
#include <csignal>
#include <cstddef>
#include <type_traits>
#include <fcntl.h>
#include <cstdio>
#include <dlfcn.h>
#include <execinfo.h>
#include <utility>

// a pto-isa build (the shadow's cpu_stub.hpp came first): the kernel's own pto-isa headers
// declared CommDeviceContext; shmcomm's kernel API would clash with them
#ifdef SHMCOMM_PTO_ISA_SHADOW
#include "shmcomm/runtime.hpp"
#else
#include "shmcomm/pto.hpp"
#endif

namespace shmcomm {
namespace native {

// pto-isa's CommDeviceContext, the layout rt.device_context builds (shmcomm/native/context.py)
struct DeviceContextLayout {
    uint64_t workSpace;
    uint64_t workSpaceSize;
    uint32_t rankId;
    uint32_t rankNum;
    uint64_t winSize;
    uint64_t windowsIn[64];
    uint64_t windowsOut[64];
};

template <typename P, typename = void> struct has_context_members : std::false_type {};
template <typename P>
struct has_context_members<P, std::void_t<decltype(P::rankId), decltype(P::rankNum), decltype(P::winSize),
                                          decltype(P::windowsIn), decltype(P::windowsOut)>> : std::true_type {};

// Whatever a kernel calls its device context (shmcomm's, pto-isa's CPU stub's, or its own header's
// struct), it takes rt.device_context when its members sit where rt.device_context has them.
template <typename P> constexpr bool is_device_context() {
    if constexpr (has_context_members<P>::value && std::is_standard_layout_v<P>) {
        using L = DeviceContextLayout;
        return sizeof(P) == sizeof(L) && offsetof(P, rankId) == offsetof(L, rankId) &&
               offsetof(P, rankNum) == offsetof(L, rankNum) && offsetof(P, winSize) == offsetof(L, winSize) &&
               offsetof(P, windowsIn) == offsetof(L, windowsIn) && offsetof(P, windowsOut) == offsetof(L, windowsOut);
    } else {
        return false;
    }
}

// The kind of each parameter, for Python's argument check: 'c' a device context pointer, 's' a
// pointer to another struct (the host builds it in a window), 'p' another pointer, 'i' an
// integer (or enum, or bool), 'f' a floating-point number.
template <typename T> constexpr char kind() {
    if constexpr (std::is_pointer_v<T>) {
        using P = std::remove_cv_t<std::remove_pointer_t<T>>;
        return is_device_context<P>() ? 'c' : std::is_class_v<P> ? 's' : 'p';
    } else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
        return 'i';
    } else if constexpr (std::is_floating_point_v<T>) {
        return 'f';
    } else {
        return '?';
    }
}

template <typename T> T unpack(uint64_t v) {
    if constexpr (std::is_pointer_v<T>) {
        return reinterpret_cast<T>(static_cast<uintptr_t>(v));
    } else if constexpr (std::is_floating_point_v<T>) {
        double d;
        std::memcpy(&d, &v, sizeof d);
        return static_cast<T>(d);
    } else {
        return static_cast<T>(static_cast<int64_t>(v));
    }
}

template <typename... A, std::size_t... I>
void invoke(void (*fn)(A...), const uint64_t* args, std::index_sequence<I...>) {
    (void)args;
    fn(unpack<A>(args[I])...);
}

template <typename... A> const char* signature(void (*)(A...)) {
    static const char kinds[] = {kind<A>()..., '\0'};
    return kinds;
}

inline void put_error(char* err, std::size_t len, const char* what) {
    char buf[512];  // (a site with a PC: shmcomm.native resolves it to the kernel's line)
    std::snprintf(err, len, "%s:%d: %s", site_file(tls_site.file, buf, sizeof buf), tls_site.line, what);
}

// 0: the kernel returned; 1: a C++ exception (text in err); 2: a Python instruction raised
template <typename... A>
int run(void (*fn)(A...), shmcomm_block* block, const uint64_t* args, char* err, std::size_t len) {
    tls_block = block;
    tls_ub_top = UB_BYTES;
    for (uint64_t& w : tls_flags) w = 0;
    tls_site = {"", 0, nullptr, nullptr};
    tls_dma_n = 0;
    int rc = 0;
    try {
        invoke(fn, args, std::index_sequence_for<A...>{});
        dma_land(nullptr, UINT64_MAX);  // the engine finishes what the kernel never waited for
    } catch (const PythonRaised&) {
        rc = 2;
    } catch (const std::exception& e) {
        put_error(err, len, e.what());
        rc = 1;
    } catch (...) {
        put_error(err, len, "a C++ exception that is not a std::exception");
        rc = 1;
    }
    tls_block = nullptr;
    return rc;
}

// -- crash reports: the rank and block, the kernel line, a native backtrace -----------------

inline struct sigaction saved_actions[32];
inline char crash_prefix[512] = "";  // + the pid: the crash note the launcher adds to its report
inline int crash_fds[2] = {2, -1};

inline void write_fd(int fd, const char* s) {  // async-signal-safe
    ssize_t n = static_cast<ssize_t>(std::strlen(s));
    while (n > 0) {
        ssize_t w = ::write(fd, s, static_cast<std::size_t>(n));
        if (w <= 0) break;
        s += w;
        n -= w;
    }
}

inline void put_str(const char* s) {
    for (int fd : crash_fds) {
        if (fd >= 0) write_fd(fd, s);
    }
}

inline void format_int(char* buf, long v) {  // async-signal-safe: no printf in a handler
    char tmp[24];
    int i = 0;
    bool neg = v < 0;
    unsigned long u = neg ? static_cast<unsigned long>(-v) : static_cast<unsigned long>(v);
    do {
        tmp[i++] = static_cast<char>('0' + u % 10);
        u /= 10;
    } while (u != 0 && i < 22);
    int k = 0;
    if (neg) buf[k++] = '-';
    while (i > 0) buf[k++] = tmp[--i];
    buf[k] = '\0';
}

inline const char* format_hex(char (&buf)[20], uintptr_t v) {  // async-signal-safe
    int i = 19;
    buf[i] = '\0';
    do {
        buf[--i] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v != 0 && i > 0);
    return buf + i;
}

inline void put_hex(uintptr_t v) {
    char buf[20];
    put_str(format_hex(buf, v));
}

inline void put_int(long v) {
    char buf[24];
    format_int(buf, v);
    put_str(buf);
}

inline void open_note() {
    if (crash_prefix[0] == '\0') return;
    char path[560];
    std::size_t n = std::strlen(crash_prefix);
    std::memcpy(path, crash_prefix, n);
    format_int(path + n, static_cast<long>(getpid()));
    crash_fds[1] = ::open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

inline void on_crash(int sig) {
    shmcomm_block* b = tls_block;
    open_note();
    put_str("native crash: ");
    put_str(sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : sig == SIGABRT ? "SIGABRT"
            : sig == SIGFPE ? "SIGFPE" : sig == SIGILL ? "SIGILL" : "signal");
    if (b != nullptr) {
        put_str(" in rank ");
        put_int(b->rank);
        put_str(" block ");
        put_int(static_cast<long>(b->block_idx));
        put_str(", after the instruction at ");
        put_str(tls_site.file);
        put_str(":");
        put_int(tls_site.line);
    } else {
        put_str(" outside a native kernel's block");
    }
    put_str("\nnative backtrace (library+offset: the launcher resolves them to file:line):\n");
    void* frames[64];
    int n = backtrace(frames, 64);
    for (int i = 2; i < n; ++i) {  // from the frame that faulted (0, 1: this handler, the signal)
        Dl_info info{};
        put_str("  #");
        put_int(i - 2);
        put_str(" ");
        if (dladdr(frames[i], &info) != 0 && info.dli_fname != nullptr) {
            uintptr_t pc = reinterpret_cast<uintptr_t>(frames[i]);
            // a return address points after its call: step back into it (not the faulting frame)
            uintptr_t off = pc - reinterpret_cast<uintptr_t>(info.dli_fbase) - (i > 2 ? 1 : 0);
            put_str(info.dli_fname);
            put_str("+0x");
            put_hex(off);
            if (info.dli_sname != nullptr) {
                put_str(" (");
                put_str(info.dli_sname);
                put_str(")");
            }
        } else {
            put_str("?");
        }
        put_str("\n");
    }
    if (crash_fds[1] >= 0) ::close(crash_fds[1]);
    // then whatever handled it before (Python's faulthandler, or the default: the rank dies of it)
    sigaction(sig, &saved_actions[sig], nullptr);
    raise(sig);
}

inline void install_crash_handlers() {
    static bool done = false;
    if (done) return;
    done = true;
    void* warm[1];
    backtrace(warm, 1);  // loads libgcc now, not in the handler
    for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL}) {
        struct sigaction sa{};
        sa.sa_handler = on_crash;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_NODEFER | SA_RESETHAND;
        sigaction(sig, &sa, &saved_actions[sig]);
    }
}

// -- the stack-dump signal: where each native block waits, then Python's dump ---------------

inline struct sigaction saved_dump_action;
inline int dump_fd = -1;
inline char library_path[512] = "";
inline uintptr_t library_base = 0;

// One line per block of this library in a registered wait ("shmcomm native wait: block B at
// FILE:LINE", plus " pc LIBRARY+0xOFFSET" when the file is a library header's: the launcher
// resolves it to the user's line), then the handler this one replaced (faulthandler's dump).
inline void on_stack_dump(int sig, siginfo_t* info, void* uc) {
    const int saved_errno = errno;
    for (const WaitNote& w : wait_notes) {
        if (__atomic_load_n(&w.used, __ATOMIC_ACQUIRE) != 1) continue;
        char num[24];
        write_fd(dump_fd, "shmcomm native wait: block ");
        format_int(num, w.block);
        write_fd(dump_fd, num);
        write_fd(dump_fd, " at ");
        write_fd(dump_fd, w.file != nullptr ? w.file : "?");
        write_fd(dump_fd, ":");
        format_int(num, w.line);
        write_fd(dump_fd, num);
        const uintptr_t pc = reinterpret_cast<uintptr_t>(w.pc);
        if (pc != 0 && library_base != 0 && pc > library_base) {
            char hex[20];
            write_fd(dump_fd, " pc ");
            write_fd(dump_fd, library_path);
            write_fd(dump_fd, "+0x");
            write_fd(dump_fd, format_hex(hex, pc - library_base));
        }
        write_fd(dump_fd, "\n");
    }
    errno = saved_errno;
    const struct sigaction& prev = saved_dump_action;
    if (prev.sa_flags & SA_SIGINFO) {
        if (prev.sa_sigaction != nullptr) prev.sa_sigaction(sig, info, uc);
    } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler != nullptr) {
        prev.sa_handler(sig);
    }
}

}  // namespace native
}  // namespace shmcomm

// Put this library's wait notes ahead of the handler of `sig` (the rank's faulthandler dump
// into `fd`); once per process (a forked rank installs its own).
extern "C" void shmcomm_install_stack_notes(int sig, int fd) {
    namespace n = shmcomm::native;
    static pid_t installed = 0;
    if (installed == getpid()) return;
    installed = getpid();
    n::dump_fd = fd;
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&shmcomm_install_stack_notes), &info) != 0 && info.dli_fname != nullptr) {
        std::snprintf(n::library_path, sizeof n::library_path, "%s", info.dli_fname);
        n::library_base = reinterpret_cast<uintptr_t>(info.dli_fbase);
    }
    struct sigaction sa{};
    sa.sa_sigaction = n::on_stack_dump;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(sig, &sa, &n::saved_dump_action);
}

extern "C" void shmcomm_install_crash_handlers(const char* prefix) {
    std::snprintf(shmcomm::native::crash_prefix, sizeof shmcomm::native::crash_prefix, "%s", prefix);
    shmcomm::native::install_crash_handlers();
}
