// runtime/job_config.h
//
// JobConfig: the job-wide settings every task and operator instance sees
// (OperatorContext::config()).  Plain values, set before the job runs and
// read-only while it runs.
#ifndef TM_RUNTIME_JOB_CONFIG_H_
#define TM_RUNTIME_JOB_CONFIG_H_

#include <cstddef>
#include <string>

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
  // Checkpoints (runtime/checkpoint_coordinator.h), when enabled: one every
  // checkpoint_interval (0: only when triggered) into checkpoint_dir (empty:
  // kept in memory), the newest checkpoints_retained kept.
  bool checkpoints_enabled = false;
  Duration checkpoint_interval{0};
  std::string checkpoint_dir;
  int checkpoints_retained = 3;
  // Where the job starts: "" fresh, "latest" the newest valid checkpoint in
  // checkpoint_dir (fresh when there is none), or a checkpoint directory.
  std::string restore_from;
  bool checkpointing() const { return checkpoints_enabled || !restore_from.empty(); }
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_JOB_CONFIG_H_
