#include "core/plan/grad_sharding.h"

namespace autopar {

std::string GradShardingRefusal(const GradShardingShape& shape) {
  if (shape.fsdp) return "keeps the weights whole and FSDP shards them";
  if (shape.pp > 1) {
    return "is planned without pipeline parallelism (pp=" + std::to_string(shape.pp) +
           "; DeepSpeed's pipeline engine refuses ZeRO stage 2)";
  }
  if (shape.experts) return "is planned for dense models, without experts";
  if (shape.data_ranks && *shape.data_ranks <= 1) {
    return "shards over the data-parallel ranks (dp*cp) and this layout has one";
  }
  return "";
}

}  // namespace autopar
