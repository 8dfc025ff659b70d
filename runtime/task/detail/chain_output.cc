#include "tidemark/runtime/task/detail/chain_output.h"

namespace tidemark::internal {

void ChainWatermark(OperatorBase* next, const OperatorContext* ctx, Timestamp w) {
  if (ctx->cancelled()) throw TaskCancelled{};
  GuardUserCall(*ctx, [&] { next->ProcessWatermark(w); });
}

void ChainStatus(OperatorBase* next, const OperatorContext* ctx, WatermarkStatus s) {
  GuardUserCall(*ctx, [&] { next->ProcessStatus(s); });
}

void FanOutWatermark(const std::vector<OutputBase*>& outs, Timestamp w) {
  for (OutputBase* o : outs) o->EmitWatermark(w);
}

void FanOutStatus(const std::vector<OutputBase*>& outs, WatermarkStatus s) {
  for (OutputBase* o : outs) o->EmitStatus(s);
}

void ChainGeneralized(OperatorBase* next, const OperatorContext* ctx,
                      const GeneralizedWatermark& w) {
  if (ctx->cancelled()) throw TaskCancelled{};
  GuardUserCall(*ctx, [&] { next->ProcessGeneralizedWatermark(w); });
}

void FanOutGeneralized(const std::vector<OutputBase*>& outs, const GeneralizedWatermark& w) {
  for (OutputBase* o : outs) o->EmitGeneralizedWatermark(w);
}

}  // namespace tidemark::internal
