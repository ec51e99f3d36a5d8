"""The private core: pointers and the symmetric heap, tensors and tiles, agents, waiting, the
control segment, the execution-model seam and the rank runtime. Kernels never import it: the
public modules (:mod:`shmcomm.comm`, :mod:`shmcomm.pipe`, :mod:`shmcomm.group`) check their
arguments and call down into it."""
