// tests/test_util.h: small helpers shared by tests.
#ifndef TM_TESTS_TEST_UTIL_H_
#define TM_TESTS_TEST_UTIL_H_

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tidemark/api/environment.h"

namespace tidemark::testing {

// How many times to repeat a randomized or concurrency case: `n`, scaled by
// the environment variable TIDEMARK_STRESS_SCALE (e.g. 0.2 under
// ThreadSanitizer, 10 for a soak run); at least 1.
inline int StressIterations(int n) {
  const char* s = std::getenv("TIDEMARK_STRESS_SCALE");
  const double scale = s ? std::atof(s) : 1.0;
  return std::max(1, static_cast<int>(n * (scale > 0 ? scale : 1.0)));
}

// Runs `client` to completion; cancels it and sets *hung if it takes longer
// than a generous limit.  Not a timing assertion on results: a case that needs
// this is a deadlock.
inline JobResult WaitWithWatchdog(JobClient& client, bool* hung) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(120), [&] { return done; })) {
      *hung = true;
      client.cancel();
    }
  });
  JobResult r = client.wait();
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  watchdog.join();
  return r;
}

// Every line of the committed (visible) files in `dir`, sorted; *hidden
// counts the hidden ones (names starting with '.': an exactly-once file
// sink's uncommitted parts).
inline std::vector<std::string> CommittedLines(const std::string& dir, int* hidden) {
  std::vector<std::string> lines;
  *hidden = 0;
  if (!std::filesystem::exists(dir)) return lines;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string()[0] == '.') {
      ++*hidden;
      continue;
    }
    std::ifstream in(e.path());
    std::string line;
    while (std::getline(in, line)) lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

// The committed lines of `dir` (see CommittedLines) read as integers, in
// numeric order; *hidden, when given, counts the hidden files.
inline std::vector<int64_t> CommittedInts(const std::string& dir, int* hidden = nullptr) {
  int ignored = 0;
  std::vector<int64_t> values;
  for (const std::string& line : CommittedLines(dir, hidden ? hidden : &ignored)) {
    values.push_back(std::stoll(line));
  }
  std::sort(values.begin(), values.end());
  return values;
}

// Record values at which a test's map throws, each once (shared by every
// attempt of a restarting job).
struct InjectedFailures {
  std::mutex mu;
  std::set<int64_t> pending;
  std::set<int64_t> thrown;
  // Makes `count` distinct values in [0, n), drawn from `rng`, pending.
  void PickRandom(std::mt19937_64& rng, int64_t n, size_t count) {
    while (pending.size() < count)
      pending.insert(static_cast<int64_t>(rng() % static_cast<uint64_t>(n)));
  }
  // Throws if `v` is pending (and moves it to `thrown`).
  void MaybeThrow(int64_t v) {
    std::lock_guard<std::mutex> lock(mu);
    if (pending.erase(v) > 0) {
      thrown.insert(v);
      throw std::runtime_error("injected failure at record " + std::to_string(v));
    }
  }
};

// Runs the shell command `command` (a program and its arguments) under a
// limit of `limit_kb` of virtual memory (none: 0), with 1 MB thread stacks
// and one malloc arena, so that the limit bounds the data rather than
// address space reserved by each thread; returns its output (stdout and
// stderr) and sets *rc to its status as pclose gives it.
inline std::string RunUnderMemoryLimit(const std::string& command, int64_t limit_kb, int* rc) {
  const std::string limit = limit_kb > 0 ? "ulimit -v " + std::to_string(limit_kb) + "; " : "";
  const std::string cmd =
      "MALLOC_ARENA_MAX=1 bash -c 'ulimit -s 1024; " + limit + "exec " + command + "' 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *rc = pclose(p);
  return out;
}

// A fresh directory under the system's temporary directory, removed with
// everything in it when the object goes.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tidemark-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  // The path of `name` inside the directory.
  std::string Path(const std::string& name) const { return path_ + "/" + name; }
  // Writes `content` to `name` inside the directory; returns its path.
  std::string File(const std::string& name, const std::string& content) const {
    const std::string f = Path(name);
    std::ofstream(f, std::ios::binary) << content;
    return f;
  }

 private:
  std::string path_;
};

// Counts lines a test's sinks have written; a test waits on it to take a
// checkpoint or savepoint while windows are firing.
struct Progress {
  std::mutex mu;
  std::condition_variable cv;
  int64_t lines = 0;
  void Add() {
    std::lock_guard<std::mutex> lock(mu);
    ++lines;
    cv.notify_all();
  }
  bool WaitFor(int64_t at_least) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(60), [&] { return lines >= at_least; });
  }
};

// Waits until `progress` has counted `lines`, then takes a checkpoint of
// `client` and waits for it to complete; a fatal test failure if any step
// fails (call it inside ASSERT_NO_FATAL_FAILURE).
inline void CheckpointAfter(JobClient& client, Progress& progress, int64_t lines) {
  ASSERT_TRUE(progress.WaitFor(lines));
  const int64_t id = client.trigger_checkpoint();
  ASSERT_GE(id, 0);
  ASSERT_TRUE(client.wait_for_checkpoint(id, Duration(60'000)));
}

}  // namespace tidemark::testing

#endif  // TM_TESTS_TEST_UTIL_H_
