// bench/prime_memory.h: warm memory before a timed run.
//
// This project's VMs run under a hypervisor that takes freed memory back
// (PVM with free page reporting: the guest kernel reports free 8 MB blocks a
// few seconds after they are freed).  Touching such memory again costs about
// 2-4 ms a MB, against a few hundred microseconds for memory the guest freed
// a moment ago, so the same run of a memory-heavy job is fast or slow
// depending on what ran before it (bench/RESULTS.md, "the host takes freed
// memory back").  PrimeMemory(gb) touches `gb` GB of fresh memory in huge
// pages and releases it: the allocations that follow are given those pages,
// still backed by the host, and cost what they cost on a host that does not
// take memory back.  Called before a timed run, outside its timing.
#ifndef TM_BENCH_PRIME_MEMORY_H_
#define TM_BENCH_PRIME_MEMORY_H_

#include <sys/mman.h>

#include <cstddef>

namespace tidemark::bench {

inline void PrimeMemory(double gb) {
  if (gb <= 0) return;
  const size_t n = static_cast<size_t>(gb * 1e9);
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return;
  madvise(p, n, MADV_HUGEPAGE);
  for (size_t i = 0; i < n; i += 4096) static_cast<volatile char*>(p)[i] = 1;
  munmap(p, n);
}

}  // namespace tidemark::bench

#endif  // TM_BENCH_PRIME_MEMORY_H_
