// admin.h: registration of the administration and metrics functions (admin.cc).
#ifndef WHARF_NODE_ADMIN_H_
#define WHARF_NODE_ADMIN_H_

#include "napi_util.h"

namespace wharf_node {

void RegisterAdmin(napi_env env, napi_value exports);

}  // namespace wharf_node

#endif  // WHARF_NODE_ADMIN_H_
