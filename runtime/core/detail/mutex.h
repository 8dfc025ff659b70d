// runtime/core/detail/mutex.h
//
// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with
// Abseil's thread-safety annotations, so that clang's -Wthread-safety checks
// every field marked ABSL_GUARDED_BY(mu_) and every function marked
// ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) / ABSL_LOCKS_EXCLUDED(mu_) at compile
// time (CI builds the libraries with clang and -Werror=thread-safety:
// TIDEMARK_THREAD_SAFETY_ANALYSIS in CMakeLists.txt).
//
// Why a wrapper and not absl::Mutex: libstdc++'s std::mutex carries no
// annotations, and Debian's Abseil is not built with ThreadSanitizer, so
// absl::Mutex's lock and unlock would be invisible to the TSan stage (every
// access it orders would be reported).  This wrapper locks a std::mutex,
// which TSan understands, and costs nothing over it.  (LevelDB's port::Mutex
// and port::CondVar follow the same scheme.)
//
// Rules of the project:
// - every mutex-protected field carries ABSL_GUARDED_BY (or
//   ABSL_PT_GUARDED_BY for what a pointer points to);
// - a private helper that expects the lock held says
//   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_); a public function that takes the
//   lock itself and must not be called with it held says
//   ABSL_LOCKS_EXCLUDED(mu_);
// - a condition wait is a loop in the function that holds the lock
//   (`while (!ready_) cv_.Wait(&mu_);`), so the analysis sees every guarded
//   read: a predicate lambda would hide them from it.
#ifndef TM_RUNTIME_MUTEX_H_
#define TM_RUNTIME_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace tidemark::internal {

class CondVar;

// A Mutex the analysis knows as a capability.
class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Tells the analysis that the caller holds the lock (it checks nothing at
  // run time); for the rare path the analysis cannot follow.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A CondVar waited on with a Mutex held.  Waits may wake
// spuriously: callers wait in a loop on their condition.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases `mu` while waiting; holds it again on return.
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // As Wait, until `deadline` at the latest; true when the deadline passed.
  template <class Clock, class Duration>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool timed_out = cv_.wait_until(lock, deadline) == std::cv_status::timeout;
    lock.release();
    return timed_out;
  }
  // As Wait, for `timeout` at the most; true when it ran out.
  template <class Rep, class Period>
  bool WaitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool timed_out = cv_.wait_for(lock, timeout) == std::cv_status::timeout;
    lock.release();
    return timed_out;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_MUTEX_H_
