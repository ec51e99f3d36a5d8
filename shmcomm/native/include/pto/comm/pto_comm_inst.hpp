// pto-isa include path: the kernel API is shmcomm/pto.hpp
#pragma once
#include "shmcomm/pto.hpp"
