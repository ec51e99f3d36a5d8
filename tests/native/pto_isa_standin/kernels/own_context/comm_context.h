// The device context an NPU kernel defines itself (the NPU toolchain has no CPU stub): the
// same names as the CPU simulation's stand-ins, pto-isa's layout.
#pragma once
#include <cstdint>

static constexpr uint32_t HCCL_MAX_RANK_NUM = 64;

struct CommDeviceContext {
    uint64_t workSpace;
    uint64_t workSpaceSize;
    uint32_t rankId;
    uint32_t rankNum;
    uint64_t winSize;
    uint64_t windowsIn[HCCL_MAX_RANK_NUM];
    uint64_t windowsOut[HCCL_MAX_RANK_NUM];
};
