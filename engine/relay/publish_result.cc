// PublishResult's names (wharf/relay.h).
#include "wharf/relay.h"

namespace wharf {

const char* ToString(PublishResult result) {
  switch (result) {
    case PublishResult::kAcknowledged:
      return "acknowledged";
    case PublishResult::kDuplicate:
      return "duplicate";
    case PublishResult::kRejected:
      return "rejected";
    case PublishResult::kTransient:
      return "transient";
  }
  return "?";
}

}  // namespace wharf
