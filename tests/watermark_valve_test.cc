// Tests for WatermarkValve: every rule of docs/semantics.md section 3.2,
// with the facts of Flink's StatusWatermarkValveTest restated as scenarios.
// After every input the test checks the exact outputs (and nothing more).
#include "tidemark/runtime/io/watermark_valve.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace tidemark {
namespace {

constexpr WatermarkStatus kIdle = WatermarkStatus::kIdle;
constexpr WatermarkStatus kActive = WatermarkStatus::kActive;

// Records what the valve emits as strings: "W:<ts>", "IDLE", "ACTIVE".
class Recorder final : public WatermarkValve::Emitter {
 public:
  void EmitWatermark(Timestamp w) override { out_.push_back("W:" + FormatTimestamp(w)); }
  void EmitStatus(WatermarkStatus s) override { out_.push_back(ToString(s)); }
  // Everything emitted since the last call.
  std::vector<std::string> Pop() {
    std::vector<std::string> r;
    r.swap(out_);
    return r;
  }

 private:
  std::vector<std::string> out_;
};

using V = std::vector<std::string>;
const V kNothing{};

TEST(WatermarkValve, InitialState) {
  WatermarkValve v(3);
  EXPECT_EQ(v.num_channels(), 3);
  EXPECT_EQ(v.last_output_watermark(), kMinTimestamp);
  EXPECT_EQ(v.last_output_status(), kActive);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(v.channel_watermark(c), kMinTimestamp);
    EXPECT_FALSE(v.channel_idle(c));
    EXPECT_TRUE(v.channel_aligned(c));
    EXPECT_FALSE(v.channel_ended(c));
  }
}

// Restored at another parallelism (RestoreOutput): the channels are at MIN
// and hold the minimum until they report; one that goes idle first must no
// longer hold it back (found by a review: the valve only looked for a new
// minimum when the idle channel was exactly at the last output, so 200
// waited for the next watermark of channel 0).
TEST(WatermarkValve, AChannelThatGoesIdleBeforeReportingAfterARescaledRestore) {
  WatermarkValve v(2);
  Recorder r;
  v.RestoreOutput(100);
  v.InputWatermark(0, 200, r);
  EXPECT_EQ(r.Pop(), kNothing) << "channel 1 has not reported";
  v.InputStatus(1, kIdle, r);
  EXPECT_EQ(r.Pop(), V{"W:200"});
  v.InputStatus(1, kActive, r);
  EXPECT_EQ(r.Pop(), kNothing) << "back below the output: it catches up first";
  v.InputWatermark(1, 150, r);
  EXPECT_EQ(r.Pop(), kNothing);
  v.InputWatermark(0, 300, r);
  EXPECT_EQ(r.Pop(), V{"W:300"});
}

TEST(WatermarkValve, SingleInputIncreasingWatermarks) {
  WatermarkValve v(1);
  Recorder r;
  v.InputWatermark(0, 0, r);
  EXPECT_EQ(r.Pop(), V{"W:0"});
  v.InputWatermark(0, 25, r);
  EXPECT_EQ(r.Pop(), V{"W:25"});
}

TEST(WatermarkValve, SingleInputDecreasingOrEqualWatermarksYieldNoOutput) {
  WatermarkValve v(1);
  Recorder r;
  v.InputWatermark(0, 25, r);
  EXPECT_EQ(r.Pop(), V{"W:25"});
  v.InputWatermark(0, 18, r);
  EXPECT_EQ(r.Pop(), kNothing);
  EXPECT_EQ(v.channel_watermark(0), 25);  // a channel's watermark never decreases
  v.InputWatermark(0, 25, r);
  EXPECT_EQ(r.Pop(), kNothing);  // never repeated
  v.InputWatermark(0, 42, r);
  EXPECT_EQ(r.Pop(), V{"W:42"});
}

TEST(WatermarkValve, MinWatermarkIsNeverEmitted) {
  WatermarkValve v(2);
  Recorder r;
  v.InputWatermark(0, kMinTimestamp, r);
  v.InputWatermark(1, kMinTimestamp, r);
  EXPECT_EQ(r.Pop(), kNothing);
}

TEST(WatermarkValve, SingleInputStatusToggling) {
  WatermarkValve v(1);
  Recorder r;
  v.InputStatus(0, kActive, r);  // channels start ACTIVE: no transition
  EXPECT_EQ(r.Pop(), kNothing);
  v.InputStatus(0, kIdle, r);
  EXPECT_EQ(r.Pop(), V{"IDLE"});
  EXPECT_EQ(v.last_output_status(), kIdle);
  v.InputStatus(0, kIdle, r);
  EXPECT_EQ(r.Pop(), kNothing);
  v.InputStatus(0, kActive, r);
  EXPECT_EQ(r.Pop(), V{"ACTIVE"});
  EXPECT_EQ(v.last_output_status(), kActive);
  v.InputStatus(0, kActive, r);
  EXPECT_EQ(r.Pop(), kNothing);
}

TEST(WatermarkValve, SingleInputWatermarkIntactDuringIdleness) {
  WatermarkValve v(1);
  Recorder r;
  v.InputWatermark(0, 25, r);
  EXPECT_EQ(r.Pop(), V{"W:25"});
  v.InputStatus(0, kIdle, r);
  EXPECT_EQ(r.Pop(), V{"IDLE"});
  v.InputWatermark(0, 50, r);  // ignored while idle, not even stored
  EXPECT_EQ(r.Pop(), kNothing);
  EXPECT_EQ(v.channel_watermark(0), 25);
  v.InputStatus(0, kActive, r);
  EXPECT_EQ(r.Pop(), V{"ACTIVE"});
  v.InputWatermark(0, 50, r);
  EXPECT_EQ(r.Pop(), V{"W:50"});
}

TEST(WatermarkValve, NoOutputUntilEveryChannelHasAWatermark) {
  WatermarkValve v(3);
  Recorder r;
  v.InputWatermark(0, 0, r);
  v.InputWatermark(1, 0, r);
  EXPECT_EQ(r.Pop(), kNothing);
  EXPECT_EQ(v.HoldingChannel(), 2);
  v.InputWatermark(2, 0, r);
  EXPECT_EQ(r.Pop(), V{"W:0"});
}

TEST(WatermarkValve, MultipleInputIncreasingWatermarks) {
  WatermarkValve v(3);
  Recorder r;
  v.InputWatermark(0, 0, r);
  v.InputWatermark(1, 0, r);
  v.InputWatermark(2, 0, r);
  EXPECT_EQ(r.Pop(), V{"W:0"});
  v.InputWatermark(0, 12, r);
  v.InputWatermark(2, 8, r);
  v.InputWatermark(2, 10, r);
  EXPECT_EQ(r.Pop(), kNothing);  // channel 1 still at 0
  v.InputWatermark(1, 15, r);
  EXPECT_EQ(r.Pop(), V{"W:10"});
  EXPECT_EQ(v.HoldingChannel(), 2);
  v.InputWatermark(2, 17, r);
  EXPECT_EQ(r.Pop(), V{"W:12"});
  v.InputWatermark(0, 20, r);
  EXPECT_EQ(r.Pop(), V{"W:15"});
  EXPECT_EQ(v.last_output_watermark(), 15);
}

TEST(WatermarkValve, MultipleInputDecreasingWatermarksYieldNoOutput) {
  WatermarkValve v(3);
  Recorder r;
  v.InputWatermark(0, 25, r);
  v.InputWatermark(1, 10, r);
  v.InputWatermark(2, 17, r);
  EXPECT_EQ(r.Pop(), V{"W:10"});
  v.InputWatermark(0, 12, r);
  v.InputWatermark(1, 8, r);
  v.InputWatermark(2, 15, r);
  EXPECT_EQ(r.Pop(), kNothing);
  EXPECT_EQ(v.channel_watermark(0), 25);
  EXPECT_EQ(v.channel_watermark(1), 10);
  EXPECT_EQ(v.channel_watermark(2), 17);
}

// The seed example (docs section 3.2 / 10 S9): channels at 14 and 29 -> 14.
TEST(WatermarkValve, SeedExampleMinimumOf14And29Is14) {
  WatermarkValve v(2);
  Recorder r;
  v.InputWatermark(0, 29, r);
  EXPECT_EQ(r.Pop(), kNothing);
  v.InputWatermark(1, 14, r);
  EXPECT_EQ(r.Pop(), V{"W:14"});
  EXPECT_EQ(v.last_output_watermark(), 14);
  EXPECT_EQ(v.HoldingChannel(), 1);
  // the faster channel moving on changes nothing; a non-advancing one neither
  v.InputWatermark(0, 35, r);
  v.InputWatermark(1, 14, r);
  EXPECT_EQ(r.Pop(), kNothing);
}

TEST(WatermarkValve, MultipleInputStatusToggling) {
  WatermarkValve v(2);
  Recorder r;
  v.InputStatus(0, kActive, r);
  v.InputStatus(1, kActive, r);
  EXPECT_EQ(r.Pop(), kNothing);
  v.InputStatus(1, kIdle, r);
  EXPECT_EQ(r.Pop(), kNothing);  // channel 0 still active
  v.InputStatus(0, kIdle, r);
  EXPECT_EQ(r.Pop(), V{"IDLE"});
  v.InputStatus(0, kIdle, r);
  v.InputStatus(1, kIdle, r);
  EXPECT_EQ(r.Pop(), kNothing);
  v.InputStatus(1, kActive, r);
  EXPECT_EQ(r.Pop(), V{"ACTIVE"});
  v.InputStatus(0, kActive, r);
  EXPECT_EQ(r.Pop(), kNothing);
}

TEST(WatermarkValve, IdleChannelDoesNotHoldBackTheMinimum) {
  WatermarkValve v(3);
  Recorder r;
  v.InputWatermark(0, 15, r);
  v.InputWatermark(1, 10, r);
  EXPECT_EQ(r.Pop(), kNothing);  // channel 2 at MIN
  v.InputStatus(2, kIdle, r);
  EXPECT_EQ(r.Pop(), V{"W:10"});
  EXPECT_FALSE(v.channel_aligned(2));
  v.InputWatermark(1, 18, r);
  EXPECT_EQ(r.Pop(), V{"W:15"});
  v.InputWatermark(0, 20, r);
  EXPECT_EQ(r.Pop(), V{"W:18"});
  // the idle channel's watermarks are ignored
  v.InputWatermark(2, 5, r);
  EXPECT_EQ(r.Pop(), kNothing);
  EXPECT_EQ(v.channel_watermark(2), kMinTimestamp);
}

TEST(WatermarkValve, AdvancesAsChannelsIndividuallyBecomeIdle) {
  WatermarkValve v(3);
  Recorder r;
  v.InputWatermark(0, 25, r);
  v.InputWatermark(1, 10, r);
  v.InputWatermark(2, 17, r);
  EXPECT_EQ(r.Pop(), V{"W:10"});
  v.InputStatus(1, kIdle, r);
  EXPECT_EQ(r.Pop(), V{"W:17"});
  v.InputStatus(2, kIdle, r);
  EXPECT_EQ(r.Pop(), V{"W:25"});
  v.InputStatus(0, kIdle, r);  // max across all (25) already out: only IDLE
  EXPECT_EQ(r.Pop(), V{"IDLE"});
}

TEST(WatermarkValve, IdleChannelAboveTheMinimumChangesNothing) {
  WatermarkValve v(3);
  Recorder r;
  v.InputWatermark(0, 10, r);
  v.InputWatermark(1, 20, r);
  v.InputWatermark(2, 30, r);
  EXPECT_EQ(r.Pop(), V{"W:10"});
  v.InputStatus(2, kIdle, r);
  EXPECT_EQ(r.Pop(), kNothing);
}

TEST(WatermarkValve, FlushesMaxAndIdleOnceAllInputsBecomeIdle) {
  // Whatever the order in which the channels go idle, the result is W(10), IDLE.
  std::vector<int> order{0, 1, 2};
  do {
    WatermarkValve v(3);
    Recorder r;
    v.InputWatermark(0, 10, r);
    v.InputWatermark(1, 5, r);
    v.InputWatermark(2, 3, r);
    ASSERT_EQ(r.Pop(), V{"W:3"});
    std::vector<std::string> all;
    for (int c : order) {
      v.InputStatus(c, kIdle, r);
      for (auto& s : r.Pop()) all.push_back(s);
    }
    ASSERT_GE(all.size(), 2u);
    EXPECT_EQ(all[all.size() - 2], "W:10") << "order " << order[0] << order[1] << order[2];
    EXPECT_EQ(all.back(), "IDLE");
    // everything emitted strictly increases
    Timestamp last = 3;
    for (size_t i = 0; i + 1 < all.size(); ++i) {
      ASSERT_EQ(all[i].substr(0, 2), "W:");
      const Timestamp w = std::stoll(all[i].substr(2));
      EXPECT_GT(w, last);
      last = w;
    }
    EXPECT_EQ(v.last_output_watermark(), 10);
    EXPECT_EQ(v.last_output_status(), kIdle);
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST(WatermarkValve, FlushExampleFromFlink) {
  WatermarkValve v(3);
  Recorder r;
  v.InputWatermark(0, 10, r);
  v.InputWatermark(1, 5, r);
  v.InputWatermark(2, 3, r);
  EXPECT_EQ(r.Pop(), V{"W:3"});
  v.InputStatus(0, kIdle, r);
  EXPECT_EQ(r.Pop(), kNothing);
  v.InputStatus(1, kIdle, r);
  EXPECT_EQ(r.Pop(), kNothing);
  v.InputStatus(2, kIdle, r);
  EXPECT_EQ(r.Pop(), (V{"W:10", "IDLE"}));
}

// FLINK-7728: the max is flushed even when the last channel to go idle is an
// unaligned one that had only partly caught up.
TEST(WatermarkValve, FlushesMaxWhenLastIdleChannelIsUnaligned) {
  WatermarkValve v(3);
  Recorder r;
  v.InputWatermark(0, 100, r);
  v.InputWatermark(1, 50, r);
  v.InputWatermark(2, 70, r);
  EXPECT_EQ(r.Pop(), V{"W:50"});
  v.InputStatus(1, kIdle, r);
  EXPECT_EQ(r.Pop(), V{"W:70"});
  v.InputStatus(1, kActive, r);
  EXPECT_FALSE(v.channel_aligned(1));
  EXPECT_EQ(r.Pop(), kNothing);
  v.InputWatermark(1, 60, r);
  EXPECT_EQ(v.channel_watermark(1), 60);
  EXPECT_FALSE(v.channel_aligned(1));
  EXPECT_EQ(r.Pop(), kNothing);
  v.InputStatus(0, kIdle, r);
  v.InputStatus(2, kIdle, r);
  EXPECT_EQ(r.Pop(), kNothing);
  v.InputStatus(1, kIdle, r);
  EXPECT_EQ(r.Pop(), (V{"W:100", "IDLE"}));
}

TEST(WatermarkValve, ReactivatedChannelMustCatchUpBeforeItCounts) {
  WatermarkValve v(3);
  Recorder r;
  v.InputWatermark(0, 10, r);
  v.InputWatermark(1, 7, r);
  v.InputWatermark(2, 3, r);
  EXPECT_EQ(r.Pop(), V{"W:3"});
  v.InputStatus(2, kIdle, r);
  EXPECT_EQ(r.Pop(), V{"W:7"});
  v.InputStatus(2, kActive, r);
  EXPECT_FALSE(v.channel_aligned(2));
  EXPECT_EQ(r.Pop(), kNothing);
  // accepted while catching up, but not counted
  v.InputWatermark(2, 5, r);
  EXPECT_EQ(v.channel_watermark(2), 5);
  EXPECT_EQ(r.Pop(), kNothing);
  EXPECT_NE(v.HoldingChannel(), 2);
  v.InputWatermark(2, 9, r);
  EXPECT_TRUE(v.channel_aligned(2));
  EXPECT_EQ(r.Pop(), kNothing);  // min over 10, 7, 9 is still 7
  v.InputWatermark(1, 12, r);
  EXPECT_EQ(r.Pop(), V{"W:9"});  // the realigned channel now holds the minimum
  EXPECT_EQ(v.HoldingChannel(), 2);
}

TEST(WatermarkValve, NoOutputWhenAllActiveChannelsAreUnaligned) {
  WatermarkValve v(3);
  Recorder r;
  v.InputWatermark(0, 10, r);
  v.InputWatermark(1, 7, r);
  v.InputStatus(2, kIdle, r);
  EXPECT_EQ(r.Pop(), V{"W:7"});
  v.InputStatus(2, kActive, r);
  EXPECT_EQ(r.Pop(), kNothing);
  v.InputStatus(0, kIdle, r);
  v.InputStatus(1, kIdle, r);
  // channel 2 is the only active channel and it is unaligned: nothing (in
  // particular no W(MAX))
  EXPECT_EQ(r.Pop(), kNothing);
  EXPECT_EQ(v.last_output_watermark(), 7);
  EXPECT_EQ(v.HoldingChannel(), -1);
}

TEST(WatermarkValve, UnalignedActiveChannelBecomesIdle) {
  WatermarkValve v(2);
  Recorder r;
  v.InputWatermark(0, 7, r);
  v.InputWatermark(1, 10, r);
  EXPECT_EQ(r.Pop(), V{"W:7"});
  v.InputStatus(0, kIdle, r);
  EXPECT_EQ(r.Pop(), V{"W:10"});
  v.InputStatus(0, kActive, r);
  v.InputWatermark(0, 9, r);
  EXPECT_EQ(r.Pop(), kNothing);
  v.InputStatus(0, kIdle, r);
  EXPECT_EQ(r.Pop(), kNothing);
}

TEST(WatermarkValve, ReactivatedChannelThatIsOnlyAlignedChannelAdvances) {
  WatermarkValve v(3);
  Recorder r;
  v.InputWatermark(0, 10, r);
  v.InputWatermark(1, 7, r);
  v.InputStatus(2, kIdle, r);
  EXPECT_EQ(r.Pop(), V{"W:7"});
  v.InputStatus(2, kActive, r);
  EXPECT_EQ(r.Pop(), kNothing);
  v.InputStatus(0, kIdle, r);
  v.InputStatus(1, kIdle, r);
  EXPECT_EQ(r.Pop(), kNothing);
  // channel 0 (at 10 >= 7) realigns at once and the minimum moves to 10
  v.InputStatus(0, kActive, r);
  EXPECT_TRUE(v.channel_aligned(0));
  EXPECT_EQ(r.Pop(), V{"W:10"});
  v.InputStatus(2, kIdle, r);
  EXPECT_EQ(r.Pop(), kNothing);
}

TEST(WatermarkValve, RealignmentAfterResumeEmitsNewMinAndNoDuplicateFlush) {
  WatermarkValve v(3);
  Recorder r;
  v.InputWatermark(0, 10, r);
  v.InputWatermark(1, 20, r);
  v.InputWatermark(2, 30, r);
  EXPECT_EQ(r.Pop(), V{"W:10"});
  v.InputStatus(2, kIdle, r);
  EXPECT_EQ(r.Pop(), kNothing);
  v.InputStatus(0, kIdle, r);
  EXPECT_EQ(r.Pop(), V{"W:20"});
  v.InputStatus(0, kActive, r);
  EXPECT_FALSE(v.channel_aligned(0));
  EXPECT_EQ(r.Pop(), kNothing);
  v.InputStatus(1, kIdle, r);
  EXPECT_EQ(r.Pop(), kNothing);
  v.InputStatus(2, kActive, r);
  EXPECT_TRUE(v.channel_aligned(2));
  EXPECT_EQ(r.Pop(), V{"W:30"});
  v.InputStatus(0, kIdle, r);
  v.InputStatus(2, kIdle, r);
  EXPECT_EQ(r.Pop(), V{"IDLE"});
}

TEST(WatermarkValve, WatermarksIgnoredWhileValveIsIdle) {
  WatermarkValve v(2);
  Recorder r;
  v.InputWatermark(0, 5, r);
  v.InputWatermark(1, 8, r);
  EXPECT_EQ(r.Pop(), V{"W:5"});
  v.InputStatus(0, kIdle, r);
  EXPECT_EQ(r.Pop(), V{"W:8"});
  v.InputStatus(1, kIdle, r);
  EXPECT_EQ(r.Pop(), V{"IDLE"});
  v.InputWatermark(1, 100, r);
  EXPECT_EQ(r.Pop(), kNothing);
  EXPECT_EQ(v.channel_watermark(1), 8);
  v.InputStatus(1, kActive, r);
  EXPECT_EQ(r.Pop(), V{"ACTIVE"});
  v.InputWatermark(1, 100, r);
  EXPECT_EQ(r.Pop(), V{"W:100"});  // channel 0 is idle, does not hold it back
}

TEST(WatermarkValve, EndedChannelCountsAsMaxWatermark) {
  WatermarkValve v(3);
  Recorder r;
  v.InputWatermark(0, 10, r);
  v.InputWatermark(1, 20, r);
  v.InputWatermark(2, 30, r);
  EXPECT_EQ(r.Pop(), V{"W:10"});
  v.InputEnd(0, r);
  EXPECT_TRUE(v.channel_ended(0));
  EXPECT_EQ(v.channel_watermark(0), kMaxWatermark);
  EXPECT_EQ(r.Pop(), V{"W:20"});
  EXPECT_EQ(v.HoldingChannel(), 1) << "an ended channel holds nothing back";
  v.InputEnd(0, r);  // repeated end: nothing
  EXPECT_EQ(r.Pop(), kNothing);
  v.InputEnd(1, r);
  EXPECT_EQ(r.Pop(), V{"W:30"});
  v.InputWatermark(2, 40, r);
  EXPECT_EQ(r.Pop(), V{"W:40"});
  v.InputEnd(2, r);
  EXPECT_EQ(r.Pop(), V{"W:" + FormatTimestamp(kMaxWatermark)});
  EXPECT_EQ(v.last_output_watermark(), kMaxWatermark);
  // After the end of input no channel holds the minimum back (the live view
  // said "MAX (held back by channel 0)").
  EXPECT_EQ(v.HoldingChannel(), -1);
}

TEST(WatermarkValve, EndOfInputWithoutWatermarksReleasesTheOthers) {
  WatermarkValve v(2);
  Recorder r;
  v.InputWatermark(1, 42, r);
  EXPECT_EQ(r.Pop(), kNothing);  // channel 0 at MIN holds it back
  v.InputEnd(0, r);
  EXPECT_EQ(r.Pop(), V{"W:42"});
}

TEST(WatermarkValve, EndOfAnIdleChannelReactivatesTheValve) {
  WatermarkValve v(2);
  Recorder r;
  v.InputWatermark(0, 5, r);
  v.InputWatermark(1, 9, r);
  EXPECT_EQ(r.Pop(), V{"W:5"});
  v.InputStatus(0, kIdle, r);
  v.InputStatus(1, kIdle, r);
  EXPECT_EQ(r.Pop(), (V{"W:9", "IDLE"}));
  v.InputEnd(1, r);
  const V out = r.Pop();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], "ACTIVE");
  EXPECT_EQ(out[1], "W:" + FormatTimestamp(kMaxWatermark));
}

// Randomised: against a straightforward model of the rules, and checking the
// invariants (strictly increasing output, output == min over aligned).
TEST(WatermarkValve, RandomSequencesKeepInvariants) {
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 2000; ++iter) {
    const int n = 1 + static_cast<int>(rng() % 5);
    WatermarkValve v(n);
    Recorder r;
    Timestamp last = kMinTimestamp;
    bool idle = false;
    for (int step = 0; step < 40; ++step) {
      const int c = static_cast<int>(rng() % n);
      const unsigned what = rng() % 10;
      if (v.channel_ended(c)) continue;
      if (what < 6) {
        v.InputWatermark(c, static_cast<Timestamp>(rng() % 100), r);
      } else if (what < 8) {
        v.InputStatus(c, kIdle, r);
      } else if (what < 9) {
        v.InputStatus(c, kActive, r);
      } else {
        v.InputEnd(c, r);
      }
      for (const std::string& e : r.Pop()) {
        if (e == "IDLE") {
          ASSERT_FALSE(idle);
          idle = true;
        } else if (e == "ACTIVE") {
          ASSERT_TRUE(idle);
          idle = false;
        } else {
          const Timestamp w = e == "W:MAX" ? kMaxTimestamp : std::stoll(e.substr(2));
          ASSERT_GT(w, last) << "watermarks must strictly increase";
          ASSERT_FALSE(idle) << "no watermark while idle";
          last = w;
        }
      }
      ASSERT_EQ(v.last_output_watermark(), last);
      ASSERT_EQ(v.last_output_status() == kIdle, idle);
      // While active with an aligned channel, output == min over aligned channels
      // (or a flushed value above it is impossible while one is aligned below).
      bool any_active = false;
      for (int k = 0; k < n; ++k) any_active |= !v.channel_idle(k);
      ASSERT_EQ(idle, !any_active);
      if (!idle) {
        Timestamp min = kMaxTimestamp;
        bool any = false;
        for (int k = 0; k < n; ++k) {
          if (!v.channel_aligned(k)) continue;
          ASSERT_FALSE(v.channel_idle(k)) << "idle channels are never aligned";
          ASSERT_GE(v.channel_watermark(k), last) << "aligned channel below the output";
          any = true;
          min = std::min(min, v.channel_watermark(k));
        }
        if (any && min != kMinTimestamp) ASSERT_EQ(min, last);
      }
    }
  }
}

}  // namespace
}  // namespace tidemark
