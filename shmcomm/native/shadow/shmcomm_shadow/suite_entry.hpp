// The entry of a pto-isa CPU comm suite built by shmcomm's suite runner (written by shmcomm):
// the suite's main(), renamed shmcomm_suite_user_main by the runner, runs on one shmcomm block
// of every rank process, so every test body (its kernels are plain calls on the CPU) executes
// on a shmcomm block: the shadow's instructions, waits that never give up, the deadlock watch.
#pragma once

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "shmcomm_shadow/suite.hpp"

int shmcomm_suite_user_main(int argc, char** argv);

namespace shmcomm {
namespace suite {

inline std::string args_text = "suite";  // argv, one per line (set by the runner)
inline std::string report;                // rank 0: one JSON object per test, one per line
inline int exit_code = -1;

// rank 0's record of every test: its gtest verdict and the outcome of its harness calls
struct Recorder : public ::testing::EmptyTestEventListener {
    void OnTestStart(const ::testing::TestInfo&) override { g.calls.clear(); }
    void OnTestEnd(const ::testing::TestInfo& t) override {
        const ::testing::TestResult* r = t.result();
        const char* verdict = r->Skipped() ? "skipped" : r->Passed() ? "passed" : "failed";
        if (g.rank == 0) {
            report += "{\"test\":" + quoted(std::string(t.test_suite_name()) + "." + t.name()) +
                      ",\"verdict\":\"" + verdict + "\",\"calls\":[" + g.calls + "]}\n";
        }
        g.calls.clear();
    }
};

}  // namespace suite
}  // namespace shmcomm

__global__ AICORE void ShmcommSuiteMain(__gm__ uint8_t* area, uint64_t areaBytes, __gm__ int32_t* sync, int a5)
{
    namespace s = shmcomm::suite;
    shmcomm_block* b = shmcomm::native::tls_block;
    s::g.rank = b->rank;
    s::g.nranks = b->nranks;
    s::g.area = area;
    s::g.area_bytes = areaBytes;
    s::g.sync = sync;
    s::g.a5 = a5 != 0;
    std::vector<std::string> words;
    std::string cur;
    for (char c : s::args_text) {
        if (c == '\n') {
            words.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    if (!cur.empty()) words.push_back(cur);
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    ::testing::TestEventListeners& ls = ::testing::UnitTest::GetInstance()->listeners();
    if (b->rank != 0) delete ls.Release(ls.default_result_printer());  // rank 0 speaks for all
    ls.Append(new s::Recorder);
    // an exception leaves the test body on one rank only: the run stops with it (the ranks'
    // collective calls would no longer match), instead of gtest recording a failure and going on
    GTEST_FLAG_SET(catch_exceptions, false);
    s::exit_code = shmcomm_suite_user_main(static_cast<int>(words.size()), argv.data());
    std::cout.flush();
    std::fflush(stdout);
}

extern "C" void shmcomm_suite_set_args(const char* text) { shmcomm::suite::args_text = text; }
extern "C" const char* shmcomm_suite_report() { return shmcomm::suite::report.c_str(); }
extern "C" int shmcomm_suite_exit_code() { return shmcomm::suite::exit_code; }
