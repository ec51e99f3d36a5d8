// Stand-in (shmcomm tests): pto-isa keeps the session and the SDMA configuration here; the
// stand-in keeps them with the other comm types.
#ifndef STANDIN_ASYNC_TYPES_HPP
#define STANDIN_ASYNC_TYPES_HPP
#include "pto/comm/comm_types.hpp"
#endif
