// A suite's host harness (ACL / HCCL on the NPU): shmcomm must never compile it; it gives the
// kernels CommRemotePtr from its own shim instead.
#error "the host harness was compiled: shmcomm's treatment of a kernel file failed"
