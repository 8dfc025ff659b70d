// The task lifecycle (runtime/task/detail/task_lifecycle.h): its table of legal moves, the
// abort on an illegal one, and a StreamTask driven through every path by hand
// (no executor, no threads): normal, restore, a failure in open, restore,
// processing and finish, and a cancel in each state.  Each path checks the
// moves the task reported, what the job was told, and which operator calls
// ran (opened operators are closed, unopened ones are not).
#include "tidemark/runtime/task/detail/task_lifecycle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "tidemark/runtime/core/clock.h"
#include "tidemark/runtime/core/detail/task_host.h"
#include "tidemark/runtime/core/job_config.h"
#include "tidemark/runtime/core/metrics.h"
#include "tidemark/runtime/core/operator.h"
#include "tidemark/runtime/io/detail/input_gate.h"
#include "tidemark/runtime/task/detail/stream_task.h"

namespace tidemark::internal {
namespace {

using L = TaskLifecycle;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr L kAll[] = {L::kCreated,  L::kRestoring, L::kRunning,  L::kFinishing,
                      L::kFinished, L::kFailed,    L::kCancelled};

TEST(TaskLifecycleTest, LegalMovesAreExactlyTheDiagrams) {
  const std::vector<std::pair<L, L>> legal = {
      {L::kCreated, L::kRestoring},  {L::kCreated, L::kRunning},  {L::kCreated, L::kCancelled},
      {L::kRestoring, L::kRunning},  {L::kRestoring, L::kFailed}, {L::kRestoring, L::kCancelled},
      {L::kRunning, L::kFinishing},  {L::kRunning, L::kFailed},   {L::kRunning, L::kCancelled},
      {L::kFinishing, L::kFinished}, {L::kFinishing, L::kFailed}, {L::kFinishing, L::kCancelled},
  };
  int count = 0;
  for (L from : kAll) {
    for (L to : kAll) {
      const bool expected =
          std::find(legal.begin(), legal.end(), std::make_pair(from, to)) != legal.end();
      EXPECT_EQ(IsLegalTransition(from, to), expected)
          << TaskLifecycleName(from) << " -> " << TaskLifecycleName(to);
      count += IsLegalTransition(from, to) ? 1 : 0;
    }
  }
  EXPECT_EQ(count, 12);
  for (L s : kAll) {
    EXPECT_EQ(IsFinal(s), s == L::kFinished || s == L::kFailed || s == L::kCancelled);
  }
  EXPECT_EQ(TaskLifecycleName(L::kFinishing), "finishing");
}

TEST(TaskLifecycleTest, MachineReportsEveryMoveAndReturnsTheStateItLeft) {
  TaskLifecycleMachine m;
  std::vector<std::pair<L, L>> seen;
  m.set_observer([&](L from, L to) { seen.emplace_back(from, to); });
  EXPECT_EQ(m.state(), L::kCreated);
  EXPECT_EQ(m.TransitionTo(L::kRunning, "t"), L::kCreated);
  EXPECT_EQ(m.TransitionTo(L::kFinishing, "t"), L::kRunning);
  EXPECT_EQ(m.TransitionTo(L::kFinished, "t"), L::kFinishing);
  EXPECT_EQ(m.state(), L::kFinished);
  EXPECT_THAT(seen, ElementsAre(std::make_pair(L::kCreated, L::kRunning),
                                std::make_pair(L::kRunning, L::kFinishing),
                                std::make_pair(L::kFinishing, L::kFinished)));
}

TEST(TaskLifecycleDeathTest, IllegalMoveAbortsNamingTheTaskAndBothStates) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        TaskLifecycleMachine m;
        m.TransitionTo(L::kRunning, "Map (0/1)");
        m.TransitionTo(L::kFinishing, "Map (0/1)");
        m.TransitionTo(L::kFinished, "Map (0/1)");
        m.TransitionTo(L::kRunning, "Map (0/1)");  // a finished task runs again
      },
      "task 'Map \\(0/1\\)' moved from finished to running");
  EXPECT_DEATH(
      {
        TaskLifecycleMachine m;
        m.TransitionTo(L::kFinished, "Sink (1/2)");  // finished without running
      },
      "task 'Sink \\(1/2\\)' moved from created to finished");
}

// --- a StreamTask driven by hand ---

class FakeHost final : public TaskHost {
 public:
  bool cancelled() const override { return flag_.load(); }
  const std::atomic<bool>* cancel_flag() const override { return &flag_; }
  void Fail(const absl::Status& status) override {
    if (failure_.ok()) failure_ = status;
    flag_.store(true);
  }
  absl::Status FirstError() const override { return failure_; }
  void Cancel() { flag_.store(true); }
  const absl::Status& failure() const { return failure_; }

 private:
  std::atomic<bool> flag_{false};
  absl::Status failure_;
};

// Where an operator or the input does something out of the ordinary.
enum class Act { kNone, kThrow, kCancelAndUnwind };

struct Script {
  Act open = Act::kNone;
  Act restore = Act::kNone;
  Act finish = Act::kNone;
  // The input's steps, in order; after the last one it says kEnd.  A step
  // that is kThrow / kCancelAndUnwind fails / cancels in the middle of
  // processing.
  std::vector<TaskInput::Step> steps;
  Act step_act = Act::kNone;  // on the last step
  std::vector<std::string>* log = nullptr;
  FakeHost* host = nullptr;
};

// What a user's code does at `act`: throws, or sees the job cancelled and
// unwinds (as a chain output does at its next element: TaskCancelled).
void Do(Act act, const Script& s, const std::string& where) {
  if (act == Act::kThrow) throw std::runtime_error(where + " broke");
  if (act == Act::kCancelAndUnwind) {
    s.host->Cancel();
    throw TaskCancelled{};
  }
}

class LoggingOperator final : public OperatorBase {
 public:
  LoggingOperator(std::string name, const Script* s) : name_(std::move(name)), s_(s) {}
  void Open(OperatorContext& ctx) override {
    OperatorBase::Open(ctx);
    s_->log->push_back("open " + name_);
    Do(s_->open, *s_, "open " + name_);
  }
  void RestoreState(StateReader& /*r*/) override {
    s_->log->push_back("restore " + name_);
    Do(s_->restore, *s_, "restore " + name_);
  }
  void Finish() override {
    s_->log->push_back("finish " + name_);
    Do(s_->finish, *s_, "finish " + name_);
  }
  void Close() override { s_->log->push_back("close " + name_); }

 private:
  std::string name_;
  const Script* s_;
};

class ScriptedInput final : public TaskInput {
 public:
  explicit ScriptedInput(const Script* s) : s_(s) {}
  void Open() override { s_->log->push_back("open input"); }
  Step RunStep() override {
    if (next_ >= s_->steps.size()) return Step::kEnd;
    const Step step = s_->steps[next_++];
    s_->log->push_back("step");
    if (next_ == s_->steps.size()) Do(s_->step_act, *s_, "processing");
    return step;
  }
  void Close() override { s_->log->push_back("close input"); }

 private:
  const Script* s_;
  size_t next_ = 0;
};

class TaskLifecyclePathTest : public ::testing::Test {
 protected:
  // A two-operator chain "A -> B" over a scripted input; with `restore`, it
  // starts from a checkpoint of the same chain.
  void Make(bool restore = false) {
    script_.log = &log_;
    script_.host = &host_;
    task_ = std::make_unique<StreamTask>(
        "A -> B", &host_, std::make_unique<SubtaskMetrics>("A -> B", 0, 1, 0), &clock_, &config_);
    for (const char* name : {"A", "B"}) {
      OperatorContext* ctx = task_->AddContext(std::make_unique<OperatorContext>(
          name, 0, 1, 128, task_->metrics(), &task_->timers(), &config_, nullptr));
      task_->AddOperator(std::make_unique<LoggingOperator>(name, &script_), ctx);
    }
    task_->SetInput(std::make_unique<ScriptedInput>(&script_));
    task_->set_lifecycle_observer([this](L from, L to) {
      EXPECT_EQ(task_->lifecycle(), to);
      moves_.push_back(std::string(TaskLifecycleName(from)) + ">" +
                       std::string(TaskLifecycleName(to)));
    });
    if (restore) {
      SubtaskSnapshot old;
      old.checkpoint_id = 7;
      old.operators = {OperatorSnapshot{"A", ""}, OperatorSnapshot{"B", ""}};
      SubtaskRestore r;
      r.checkpoint_id = 7;
      r.old_parallelism = 1;
      r.old = std::make_shared<std::vector<SubtaskSnapshot>>(std::vector<SubtaskSnapshot>{old});
      task_->SetRestoreState(std::move(r));
    }
  }
  // Runs slices until the task says it finished (at most `max`).
  int RunToEnd(int max = 10) {
    for (int i = 1; i <= max; ++i)
      if (task_->RunSlice() == Task::Result::kFinished) return i;
    return -1;
  }

  FakeHost host_;
  ManualClock clock_{1000};
  JobConfig config_;
  Script script_;
  std::vector<std::string> log_;
  std::vector<std::string> moves_;
  std::unique_ptr<StreamTask> task_;
};

using Step = TaskInput::Step;

TEST_F(TaskLifecyclePathTest, NormalPathOpensRunsFinishesAndClosesOnce) {
  script_.steps = {Step::kMore, Step::kNothing};
  Make();
  EXPECT_EQ(task_->lifecycle(), L::kCreated);
  EXPECT_EQ(task_->RunSlice(), Task::Result::kWait);  // one step, then nothing
  EXPECT_EQ(task_->lifecycle(), L::kRunning);
  EXPECT_EQ(RunToEnd(), 1);
  EXPECT_EQ(task_->lifecycle(), L::kFinished);
  EXPECT_THAT(moves_, ElementsAre("created>running", "running>finishing", "finishing>finished"));
  // Opened tail first; finished head first; closed once.
  EXPECT_THAT(log_, ElementsAre("open B", "open A", "open input", "step", "step", "finish A",
                                "finish B", "close A", "close B", "close input"));
  EXPECT_TRUE(host_.failure().ok());
  EXPECT_TRUE(task_->metrics()->finished.load());
}

TEST_F(TaskLifecyclePathTest, RestorePathRestoresEveryOperatorBeforeRunning) {
  Make(/*restore=*/true);
  EXPECT_EQ(RunToEnd(), 1);
  EXPECT_THAT(moves_, ElementsAre("created>restoring", "restoring>running", "running>finishing",
                                  "finishing>finished"));
  EXPECT_THAT(log_, ElementsAre("open B", "open A", "open input", "restore A", "restore B",
                                "finish A", "finish B", "close A", "close B", "close input"));
  EXPECT_TRUE(host_.failure().ok());
}

TEST_F(TaskLifecyclePathTest, FailureInOpenFailsTheJobAndClosesWhatWasOpened) {
  script_.open = Act::kThrow;
  Make();
  EXPECT_EQ(RunToEnd(), 1);
  EXPECT_EQ(task_->lifecycle(), L::kFailed);
  EXPECT_THAT(moves_, ElementsAre("created>running", "running>failed"));
  EXPECT_THAT(host_.failure().message(), HasSubstr("open B broke"));
  // B threw in Open: every operator is closed, as before the state machine.
  EXPECT_THAT(log_, ElementsAre("open B", "close A", "close B", "close input"));
}

TEST_F(TaskLifecyclePathTest, FailureInRestoreFailsFromRestoring) {
  script_.restore = Act::kThrow;
  Make(/*restore=*/true);
  EXPECT_EQ(RunToEnd(), 1);
  EXPECT_THAT(moves_, ElementsAre("created>restoring", "restoring>failed"));
  EXPECT_THAT(host_.failure().message(), HasSubstr("restore A broke"));
  EXPECT_THAT(log_, ElementsAre("open B", "open A", "open input", "restore A", "close A", "close B",
                                "close input"));
}

TEST_F(TaskLifecyclePathTest, FailureInProcessingFailsFromRunning) {
  script_.steps = {Step::kMore, Step::kMore};
  script_.step_act = Act::kThrow;
  Make();
  EXPECT_EQ(RunToEnd(), 1);
  EXPECT_THAT(moves_, ElementsAre("created>running", "running>failed"));
  EXPECT_THAT(host_.failure().message(), HasSubstr("processing broke"));
  EXPECT_THAT(host_.failure().message(), HasSubstr("task 'A -> B' (subtask 0 of 1) failed"));
  EXPECT_THAT(log_, ElementsAre("open B", "open A", "open input", "step", "step", "close A",
                                "close B", "close input"));
}

TEST_F(TaskLifecyclePathTest, FailureInFinishFailsFromFinishing) {
  script_.finish = Act::kThrow;
  Make();
  EXPECT_EQ(RunToEnd(), 1);
  EXPECT_THAT(moves_, ElementsAre("created>running", "running>finishing", "finishing>failed"));
  EXPECT_THAT(host_.failure().message(), HasSubstr("finish A broke"));
  EXPECT_FALSE(task_->metrics()->finished.load());
  EXPECT_THAT(log_, ElementsAre("open B", "open A", "open input", "finish A", "close A", "close B",
                                "close input"));
}

TEST_F(TaskLifecyclePathTest, CancelBeforeTheFirstSliceOpensAndClosesNothing) {
  Make();
  host_.Cancel();
  EXPECT_EQ(RunToEnd(), 1);
  EXPECT_EQ(task_->lifecycle(), L::kCancelled);
  EXPECT_THAT(moves_, ElementsAre("created>cancelled"));
  EXPECT_TRUE(log_.empty());
  EXPECT_TRUE(host_.failure().ok());
}

TEST_F(TaskLifecyclePathTest, CancelWhileRestoringClosesTheOpenedChain) {
  script_.restore = Act::kCancelAndUnwind;
  Make(/*restore=*/true);
  EXPECT_EQ(RunToEnd(), 1);
  EXPECT_THAT(moves_, ElementsAre("created>restoring", "restoring>cancelled"));
  EXPECT_TRUE(host_.failure().ok());  // a cancel is not a failure
  EXPECT_THAT(log_, ElementsAre("open B", "open A", "open input", "restore A", "close A", "close B",
                                "close input"));
}

TEST_F(TaskLifecyclePathTest, CancelBetweenSlicesWhileRunning) {
  script_.steps = {Step::kNothing};
  Make();
  EXPECT_EQ(task_->RunSlice(), Task::Result::kWait);
  host_.Cancel();
  EXPECT_EQ(RunToEnd(), 1);
  EXPECT_THAT(moves_, ElementsAre("created>running", "running>cancelled"));
  EXPECT_THAT(log_, ElementsAre("open B", "open A", "open input", "step", "close A", "close B",
                                "close input"));
}

TEST_F(TaskLifecyclePathTest, CancelInTheMiddleOfProcessing) {
  script_.steps = {Step::kMore};
  script_.step_act = Act::kCancelAndUnwind;
  Make();
  EXPECT_EQ(RunToEnd(), 1);
  EXPECT_THAT(moves_, ElementsAre("created>running", "running>cancelled"));
  EXPECT_TRUE(host_.failure().ok());
}

TEST_F(TaskLifecyclePathTest, CancelWhileFinishing) {
  script_.finish = Act::kCancelAndUnwind;
  Make();
  EXPECT_EQ(RunToEnd(), 1);
  EXPECT_THAT(moves_, ElementsAre("created>running", "running>finishing", "finishing>cancelled"));
  EXPECT_TRUE(host_.failure().ok());
  EXPECT_FALSE(task_->metrics()->finished.load());
  EXPECT_THAT(log_, ElementsAre("open B", "open A", "open input", "finish A", "close A", "close B",
                                "close input"));
}

}  // namespace
}  // namespace tidemark::internal
