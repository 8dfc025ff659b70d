// tests/cli_test_util.h: running the built `tidemark` binary from tests.
#ifndef TM_TESTS_CLI_TEST_UTIL_H_
#define TM_TESTS_CLI_TEST_UTIL_H_

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"

namespace tidemark::testing {

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
  std::vector<std::string> OutLines() const {
    std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
    return lines;
  }
};

inline std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'')
      q += "'\\''";
    else
      q += c;
  }
  return q + "'";
}

// The folder TempPath's files go in: made once per test process under
// $TEST_TMPDIR (else the system's temporary directory) and removed with
// everything in it when that process exits, so that runs leave nothing
// behind (they used to leave about 80 files, 17 MB, in /tmp each: outputs,
// fifos, Chromium profiles).  A forked child that exits does not remove it.
inline const std::string& ProcessTempDir() {
  static const struct Dir {
    std::string path;
    pid_t owner = getpid();
    Dir() {
      const char* env = std::getenv("TEST_TMPDIR");
      const std::string base = env ? env : std::filesystem::temp_directory_path().string();
      std::string tmpl = base + "/tidemark-test-" + std::to_string(owner) + "-XXXXXX";
      if (mkdtemp(tmpl.data()) == nullptr) {
        std::perror(("mkdtemp " + tmpl).c_str());
        std::abort();
      }
      path = tmpl;
    }
    ~Dir() {
      if (getpid() != owner) return;
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } dir;
  return dir.path;
}

inline std::string TempPath(const std::string& name) {
  return ProcessTempDir() + "/tidemark_" + name;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

// Runs `tidemark args...` (stdin from `stdin_text` when given).
inline CliRun RunTidemark(const std::vector<std::string>& args,
                          const std::string* stdin_text = nullptr) {
  static int counter = 0;
  const std::string stem = TempPath("cli" + std::to_string(++counter));
  std::string cmd = ShellQuote(TIDEMARK_BINARY);
  for (const auto& a : args) cmd += " " + ShellQuote(a);
  if (stdin_text) {
    WriteFile(stem + ".in", *stdin_text);
    cmd += " < " + ShellQuote(stem + ".in");
  } else {
    cmd += " < /dev/null";
  }
  cmd += " > " + ShellQuote(stem + ".out") + " 2> " + ShellQuote(stem + ".err");
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadFile(stem + ".out");
  r.err = ReadFile(stem + ".err");
  std::remove((stem + ".out").c_str());
  std::remove((stem + ".err").c_str());
  std::remove((stem + ".in").c_str());
  return r;
}

// A `tidemark` process started by the test, its stdout and stderr read
// through pipes.  Every wait is bounded by a deadline: at the deadline the
// process is killed (SIGKILL) and the wait reports it, so a hang is a test
// failure, never a hung test.
class CliProcess {
 public:
  using Clock = std::chrono::steady_clock;
  // stdin_fd >= 0 becomes the child's fd 0; kStdinClosed starts it with fd 0
  // closed.
  static constexpr int kStdinClosed = -1;

  CliProcess(const std::vector<std::string>& args, int stdin_fd)
      : CliProcess(TIDEMARK_BINARY, args, stdin_fd) {}
  // Another program (mpirun, for cli_mpi_test).
  CliProcess(const std::string& program, const std::vector<std::string>& args, int stdin_fd) {
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) return;
    std::vector<std::string> argv_s = {program};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      // Only async-signal-safe calls until exec.  Signals as a shell gives
      // them to a foreground command: default dispositions, none blocked.
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      if (stdin_fd >= 0) {
        dup2(stdin_fd, 0);
      } else {
        close(0);
      }
      dup2(out[1], 1);
      dup2(err[1], 2);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
  }
  ~CliProcess() {
    if (pid_ > 0 && exit_code_ == kRunning) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) close(out_fd_);
    if (err_fd_ >= 0) close(err_fd_);
  }
  CliProcess(const CliProcess&) = delete;
  CliProcess& operator=(const CliProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

  // Reads until stdout holds a complete line; false at EOF or the deadline.
  bool WaitForOutLine(std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (out_.find('\n') == std::string::npos) {
      if (!ReadSome(deadline)) return false;
      if (out_fd_ < 0 && out_.find('\n') == std::string::npos) return false;
    }
    return true;
  }

  // Waits until stdout has something to read, without reading it (so a
  // process writing much more than a pipe holds blocks); false at EOF or the
  // deadline.
  bool WaitForOutReadable(std::chrono::seconds limit) {
    if (out_fd_ < 0) return false;
    pollfd fd = {out_fd_, POLLIN, 0};
    for (;;) {
      const int n = poll(&fd, 1, static_cast<int>(limit.count() * 1000));
      if (n < 0 && errno == EINTR) continue;
      return n == 1 && (fd.revents & POLLIN) != 0;
    }
  }

  // Reads (stdout and stderr) until stdout contains `text`; false at EOF or
  // the deadline.
  bool WaitForOut(const std::string& text, std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (out_.find(text) == std::string::npos) {
      if (out_fd_ < 0 || !ReadSome(deadline)) return false;
    }
    return true;
  }

  // Reads stderr (only) until it contains `text`; false at EOF or the
  // deadline.
  bool WaitForErr(const std::string& text, std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (err_.find(text) == std::string::npos) {
      if (err_fd_ < 0 || !ReadSome(deadline, /*read_out=*/false)) return false;
    }
    return true;
  }

  // Reads what stdout and stderr hold now, without waiting for more.  A test
  // that polls something else while the process runs (the live view's
  // server) calls it in its loop, so that a job printing its results never
  // blocks on a full pipe meanwhile (the windows that fire at the end of a
  // long run are more than a pipe holds).
  void ReadAvailable() {
    while ((out_fd_ >= 0 || err_fd_ >= 0) &&
           ReadSome(Clock::now() + std::chrono::milliseconds(2))) {
    }
  }

  // Reads stdout and stderr to the end and reaps the process: its exit
  // status, or 128 + signal when a signal ended it, or kTimedOut when it was
  // still running at the deadline (it is then killed).
  static constexpr int kTimedOut = -2;
  static constexpr int kRunning = -3;
  // Reads stdout and stderr until they end and reaps the process, as Wait
  // does, but leaves it running at the deadline: kRunning then.  A limit of
  // 0 still looks once (1 ms).
  int WaitAtMost(std::chrono::milliseconds limit) {
    if (exit_code_ != kRunning) return exit_code_;
    const auto deadline = Clock::now() + std::max(limit, std::chrono::milliseconds(1));
    while (out_fd_ >= 0 || err_fd_ >= 0) {
      if (!ReadSome(deadline)) return kRunning;
    }
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) != pid_) {
      if (Clock::now() >= deadline) return kRunning;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling the child
    }
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_code_;
  }
  int Wait(std::chrono::seconds limit) {
    if (exit_code_ != kRunning) return exit_code_;
    const auto deadline = Clock::now() + limit;
    while (out_fd_ >= 0 || err_fd_ >= 0) {
      if (!ReadSome(deadline)) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        exit_code_ = kTimedOut;
        return exit_code_;
      }
    }
    int status = 0;
    waitpid(pid_, &status, 0);
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_code_;
  }

 private:
  // One poll and read of whatever is ready; false at the deadline.
  bool ReadSome(Clock::time_point deadline, bool read_out = true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd fds[2] = {{read_out ? out_fd_ : -1, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    const int n = poll(fds, 2, static_cast<int>(left));
    if (n < 0) return errno == EINTR;
    if (n == 0) return false;
    Drain(fds[0].revents, &out_fd_, &out_);
    Drain(fds[1].revents, &err_fd_, &err_);
    return true;
  }
  static void Drain(short revents, int* fd, std::string* to) {
    if (*fd < 0 || revents == 0) return;
    char buf[4096];
    const ssize_t r = read(*fd, buf, sizeof(buf));
    if (r > 0) {
      to->append(buf, static_cast<size_t>(r));
    } else if (r == 0 || errno != EINTR) {
      close(*fd);
      *fd = -1;
    }
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string out_, err_;
  int exit_code_ = kRunning;
};

// FIFOs a test feeds a `tidemark run` through, so that each step can wait
// for what the previous one caused: Args() are the --input flags; Open()
// after starting the process (read-write, so it does not wait for the
// reader); Write(i, line) adds a line; Close() ends every input.
class FifoInputs {
 public:
  FifoInputs(const std::string& prefix, int n) {
    for (int i = 0; i < n; ++i) {
      paths_.push_back(TempPath(prefix + "_" + std::to_string(i) + ".fifo"));
      std::filesystem::remove(paths_.back());
      ok_ = ok_ && mkfifo(paths_.back().c_str(), 0600) == 0;
    }
  }
  ~FifoInputs() {
    Close();
    for (const auto& p : paths_) std::filesystem::remove(p);
  }
  bool ok() const { return ok_; }
  std::vector<std::string> Args() const {
    std::vector<std::string> a;
    for (const auto& p : paths_) a.push_back("--input=" + p);
    return a;
  }
  bool Open() {
    for (const auto& p : paths_) {
      const int fd = open(p.c_str(), O_RDWR);
      if (fd < 0) return false;
      fds_.push_back(fd);
    }
    return true;
  }
  bool Write(size_t input, const std::string& line) {
    const std::string l = line + "\n";
    return write(fds_.at(input), l.data(), l.size()) == static_cast<ssize_t>(l.size());
  }
  size_t size() const { return paths_.size(); }
  void Close() {
    for (int fd : fds_)
      if (fd >= 0) close(fd);
    fds_.clear();
  }
  // Ends input `input` alone (its reader sees the end of the file).
  void CloseInput(size_t input) {
    int& fd = fds_.at(input);
    if (fd >= 0) close(fd);
    fd = -1;
  }

 private:
  std::vector<std::string> paths_;
  std::vector<int> fds_;
  bool ok_ = true;
};

}  // namespace tidemark::testing

#endif  // TM_TESTS_CLI_TEST_UTIL_H_
