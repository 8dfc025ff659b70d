// runtime/task/watermark_strategy.cc: WatermarkStrategy<T>'s settings that do
// not depend on T.
#include "tidemark/runtime/task/watermark_strategy.h"

namespace tidemark::internal {

WatermarkStrategyOptions::WatermarkStrategyOptions() = default;
WatermarkStrategyOptions::WatermarkStrategyOptions(const WatermarkStrategyOptions& other) = default;
WatermarkStrategyOptions::WatermarkStrategyOptions(WatermarkStrategyOptions&& other) noexcept =
    default;
WatermarkStrategyOptions& WatermarkStrategyOptions::operator=(
    const WatermarkStrategyOptions& other) = default;
WatermarkStrategyOptions& WatermarkStrategyOptions::operator=(
    WatermarkStrategyOptions&& other) noexcept = default;
WatermarkStrategyOptions::~WatermarkStrategyOptions() = default;

}  // namespace tidemark::internal
