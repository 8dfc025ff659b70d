// runtime/job_config.h
//
// JobConfig: the job-wide settings every task and operator instance sees
// (OperatorContext::config()).  Plain values, set before the job runs and
// read-only while it runs.
#ifndef TM_RUNTIME_JOB_CONFIG_H_
#define TM_RUNTIME_JOB_CONFIG_H_

#include <cstddef>

#include "runtime/time.h"

namespace tidemark::internal {

struct JobConfig {
  Duration auto_watermark_interval{200};
  Duration buffer_timeout{100};
  size_t batch_size = 1024;
  size_t channel_capacity = 4;  // batches
  // Who runs the non-blocking tasks: the job's own WorkerPool (default:
  // tasks keep a home worker, runtime/worker_pool.h) or oneTBB's task_arena
  // (runtime/arena_scheduler.h: any free worker takes the next slice).
  enum class Scheduler { kWorkerPool, kTbbArena };
  Scheduler scheduler = Scheduler::kWorkerPool;
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_JOB_CONFIG_H_
