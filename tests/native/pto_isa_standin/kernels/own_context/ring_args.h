// A struct of the kernel's own with another layout: the host builds it in a window.
#pragma once
#include <cstdint>

struct RingArgs {
    int32_t rank;
    int32_t next;
    uint64_t nextBase;  // the next rank's window base, as this rank process maps it
    uint64_t myBase;
};
