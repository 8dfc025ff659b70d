// runtime/core/generalized_watermark.h
//
// Generalized watermarks (Flink 2's FLIP-467, DataStream V2): watermark kinds
// a job declares itself, beside the built-in event-time watermark.  Each kind
// has an identifier, a value type (a long or a bool), a combination function
// (min or max for longs, and or or for bools), whether a subtask combines only
// once every input channel has reported (Flink's combineWaitForAllChannels)
// and what the framework does with one a process function only peeked at
// (forward it or drop it).  tidemark adds one choice Flink 2 does not have:
// whether idle input channels are left out of the combination.
//
//   const auto backlog = WatermarkDeclarations::new_builder("backlog")
//                            .type_bool().combine_function_or().build();
//   const auto progress = WatermarkDeclarations::new_builder("progress")
//                             .type_long().combine_function_max()
//                             .combine_wait_for_all_channels(true).build();
//   out.emit_watermark(backlog.new_watermark(true));   // in a process function
//
// A watermark travels as a control element (runtime/core/stream_element.h,
// ControlKind::kGeneralized) broadcast on every output channel, like the
// event-time watermark; each subtask's input gate combines what its channels
// send (runtime/io/watermark_combiner.h) and hands the combined value to the
// head of its chain (OutputBase::EmitGeneralizedWatermark,
// OperatorBase::ProcessGeneralizedWatermark).  docs/generalized-watermarks.md
// says the rules.
//
// Declarations are interned in a process-wide registry: the same
// declaration (identifier and policy) has the same small id everywhere in the
// process, which is what a control element carries; between ranks the
// remote codec sends the whole declaration, so the ids need not agree.
#ifndef TM_RUNTIME_GENERALIZED_WATERMARK_H_
#define TM_RUNTIME_GENERALIZED_WATERMARK_H_

#include <cstdint>
#include <string>
#include <utility>

namespace tidemark {

// Flink's WatermarkCombinationFunction: NumericWatermarkCombinationFunction
// (MIN, MAX) and BoolWatermarkCombinationFunction (AND, OR).
enum class WatermarkCombinationFunction : uint8_t { kMin, kMax, kAnd, kOr };
// What the framework does with a watermark a process function returned kPeek
// for (Flink's WatermarkHandlingStrategy).
enum class WatermarkHandlingStrategy : uint8_t { kForward, kIgnore };
// What a process function's on_watermark returns (Flink's
// WatermarkHandlingResult): kPeek, the framework handles it (by the
// declaration's handling strategy); kPoll, the function took it (it emits
// what it wants itself) and the framework does nothing.
enum class WatermarkHandlingResult : uint8_t { kPeek, kPoll };
enum class WatermarkValueType : uint8_t { kLong, kBool };

const char* ToString(WatermarkCombinationFunction f);

namespace internal {
// An interned declaration (never freed: its address and id stay valid for the
// life of the process).
struct WatermarkSpec {
  std::string identifier;
  WatermarkValueType type = WatermarkValueType::kLong;
  WatermarkCombinationFunction function = WatermarkCombinationFunction::kMin;
  bool wait_for_all_channels = false;
  bool ignore_idle_channels = false;
  WatermarkHandlingStrategy strategy = WatermarkHandlingStrategy::kForward;
  uint16_t id = 0;  // set by Intern

  bool SamePolicy(const WatermarkSpec& o) const {
    return identifier == o.identifier && type == o.type && function == o.function &&
           wait_for_all_channels == o.wait_for_all_channels &&
           ignore_idle_channels == o.ignore_idle_channels && strategy == o.strategy;
  }
};

// The registry.  Intern: the spec equal to `s` (registering it on first use);
// throws std::invalid_argument when the function does not fit the type or
// when more than 65535 declarations were interned.  Lookup: the spec of an
// id (nullptr when none).  Thread-safe.
const WatermarkSpec* InternWatermarkSpec(const WatermarkSpec& s);
const WatermarkSpec* LookupWatermarkSpec(uint16_t id);
}  // namespace internal

// One generalized watermark: a declared kind and a value (Flink's
// LongWatermark / BoolWatermark).  A small value type.
class GeneralizedWatermark {
 public:
  GeneralizedWatermark(const internal::WatermarkSpec* spec, int64_t value)
      : spec_(spec), value_(value) {}
  const std::string& identifier() const { return spec_->identifier; }
  bool is_long() const { return spec_->type == WatermarkValueType::kLong; }
  bool is_bool() const { return spec_->type == WatermarkValueType::kBool; }
  int64_t long_value() const { return value_; }
  bool bool_value() const { return value_ != 0; }
  // "backlog=true", "progress=42".
  std::string ToString() const;
  const internal::WatermarkSpec& spec() const { return *spec_; }
  int64_t raw_value() const { return value_; }
  bool operator==(const GeneralizedWatermark& o) const {
    return spec_ == o.spec_ && value_ == o.value_;
  }

 private:
  const internal::WatermarkSpec* spec_;
  int64_t value_;
};

// A declared kind (Flink's WatermarkDeclaration).  Cheap to copy.
class WatermarkDeclaration {
 public:
  explicit WatermarkDeclaration(const internal::WatermarkSpec* spec) : spec_(spec) {}
  const std::string& identifier() const { return spec_->identifier; }
  WatermarkValueType value_type() const { return spec_->type; }
  WatermarkCombinationFunction combination_function() const { return spec_->function; }
  bool combine_wait_for_all_channels() const { return spec_->wait_for_all_channels; }
  bool ignore_idle_channels() const { return spec_->ignore_idle_channels; }
  WatermarkHandlingStrategy default_handling_strategy() const { return spec_->strategy; }
  const internal::WatermarkSpec* spec() const { return spec_; }
  // Whether `w` is of this kind.
  bool matches(const GeneralizedWatermark& w) const { return &w.spec() == spec_; }

 protected:
  const internal::WatermarkSpec* spec_;
};

class LongWatermarkDeclaration : public WatermarkDeclaration {
 public:
  using WatermarkDeclaration::WatermarkDeclaration;
  GeneralizedWatermark new_watermark(int64_t value) const { return {spec_, value}; }
};

class BoolWatermarkDeclaration : public WatermarkDeclaration {
 public:
  using WatermarkDeclaration::WatermarkDeclaration;
  GeneralizedWatermark new_watermark(bool value) const { return {spec_, value ? 1 : 0}; }
};

// Flink's WatermarkDeclarations builder, in snake_case:
//   WatermarkDeclarations::new_builder("id").type_long()   // or type_bool()
//       .combine_function_max()          // min (default), max; and (default), or
//       .combine_wait_for_all_channels(true)               // default false
//       .default_handling_strategy_ignore()                // default forward
//       .ignore_idle_channels(true)      // tidemark's own; default false
//       .build();
class WatermarkDeclarations {
 public:
  template <typename Self, typename Decl>
  class TypedBuilder {
   public:
    Self& combine_wait_for_all_channels(bool wait) {
      spec_.wait_for_all_channels = wait;
      return self();
    }
    Self& default_handling_strategy(WatermarkHandlingStrategy s) {
      spec_.strategy = s;
      return self();
    }
    Self& default_handling_strategy_forward() {
      return default_handling_strategy(WatermarkHandlingStrategy::kForward);
    }
    Self& default_handling_strategy_ignore() {
      return default_handling_strategy(WatermarkHandlingStrategy::kIgnore);
    }
    // Not in Flink 2 (whose generalized watermarks know no idleness): an idle
    // channel (WatermarkStatus::kIdle, or one that has ended) is left out of
    // the combination and need not have reported for
    // combine_wait_for_all_channels; when every channel is idle, all count.
    Self& ignore_idle_channels(bool ignore) {
      spec_.ignore_idle_channels = ignore;
      return self();
    }
    Decl build() const { return Decl(internal::InternWatermarkSpec(spec_)); }

   protected:
    TypedBuilder(std::string id, WatermarkValueType t, WatermarkCombinationFunction f) {
      spec_.identifier = std::move(id);
      spec_.type = t;
      spec_.function = f;
    }
    Self& self() { return static_cast<Self&>(*this); }
    internal::WatermarkSpec spec_;
  };

  class LongWatermarkBuilder : public TypedBuilder<LongWatermarkBuilder, LongWatermarkDeclaration> {
   public:
    explicit LongWatermarkBuilder(std::string id)
        : TypedBuilder(std::move(id), WatermarkValueType::kLong,
                       WatermarkCombinationFunction::kMin) {}
    LongWatermarkBuilder& combine_function_max() {
      spec_.function = WatermarkCombinationFunction::kMax;
      return *this;
    }
    LongWatermarkBuilder& combine_function_min() {
      spec_.function = WatermarkCombinationFunction::kMin;
      return *this;
    }
  };

  class BoolWatermarkBuilder : public TypedBuilder<BoolWatermarkBuilder, BoolWatermarkDeclaration> {
   public:
    explicit BoolWatermarkBuilder(std::string id)
        : TypedBuilder(std::move(id), WatermarkValueType::kBool,
                       WatermarkCombinationFunction::kAnd) {}
    BoolWatermarkBuilder& combine_function_or() {
      spec_.function = WatermarkCombinationFunction::kOr;
      return *this;
    }
    BoolWatermarkBuilder& combine_function_and() {
      spec_.function = WatermarkCombinationFunction::kAnd;
      return *this;
    }
  };

  class WatermarkBuilder {
   public:
    explicit WatermarkBuilder(std::string id) : id_(std::move(id)) {}
    LongWatermarkBuilder type_long() const { return LongWatermarkBuilder(id_); }
    BoolWatermarkBuilder type_bool() const { return BoolWatermarkBuilder(id_); }

   private:
    std::string id_;
  };

  static WatermarkBuilder new_builder(std::string identifier) {
    return WatermarkBuilder(std::move(identifier));
  }
};

}  // namespace tidemark

#endif  // TM_RUNTIME_GENERALIZED_WATERMARK_H_
