// shmcomm's stand-in for the Ascend runtime's acl/acl.h (written by shmcomm, no ACL or pto-isa
// code). A pto-isa kernel file that includes it keeps its host code beside its kernels; shmcomm
// blanks that host code in the unit it compiles, and the ACL names the rest may still mention
// (aclrtStream, aclrtMalloc, aclrtMemcpy, ...) are those pto-isa's CPU back end declares in its
// cpu_stub.hpp, which this includes.
#pragma once

#include <pto/common/cpu_stub.hpp>
