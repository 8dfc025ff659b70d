// A field marked ABSL_GUARDED_BY (runtime/core/detail/mutex.h) touched without its mutex
// must fail to compile under clang's -Wthread-safety -Werror=thread-safety,
// the flags of CI's thread-safety build (TIDEMARK_THREAD_SAFETY_ANALYSIS):
// each thread_safety_rejects_<case> ctest (tests/CMakeLists.txt) compiles
// this file with clang and one TIDEMARK_REJECT_<case> defined and passes when
// clang reports that case's violation; thread_safety_accepts compiles it with
// none defined and must succeed, so a failure above is the violation's and
// nothing else's.  Never built by default.
#include <chrono>

#include "tidemark/runtime/core/detail/mutex.h"

namespace tidemark::internal {
namespace {

class Account {
 public:
  void Deposit(int n) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    AddLocked(n);
    cv_.SignalAll();
  }
  int Balance() const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return balance_;
  }
  void AwaitAtLeast(int n) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    while (balance_ < n) cv_.WaitFor(&mu_, std::chrono::milliseconds(1));
  }

#if defined(TIDEMARK_REJECT_unguarded_write)
  // Writes the guarded field without the lock.
  void Reset() { balance_ = 0; }
#elif defined(TIDEMARK_REJECT_unguarded_read)
  // Reads the guarded field without the lock.
  int Peek() const { return balance_; }
#elif defined(TIDEMARK_REJECT_lock_not_held)
  // Calls a function that needs the lock without it.
  void Bonus() { AddLocked(1); }
#elif defined(TIDEMARK_REJECT_lock_held_twice)
  // Calls a function that takes the lock with it held (a self-deadlock).
  void Twice() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    Deposit(1);
  }
#elif defined(TIDEMARK_REJECT_wait_unlocked)
  // Waits on the condition without holding its mutex.
  void WaitUnlocked() { cv_.Wait(&mu_); }
#endif

 private:
  void AddLocked(int n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { balance_ += n; }

  mutable Mutex mu_;
  CondVar cv_;
  int balance_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace
}  // namespace tidemark::internal

int main() {
  tidemark::internal::Account a;
  a.Deposit(1);
  a.AwaitAtLeast(1);
  return a.Balance() == 1 ? 0 : 1;
}
