// addon.cc: the module's entry point (wharf.node): instance data and the exported functions.
// The package's JavaScript (lib/) is the API; this module's functions are private to it.
#include "admin.h"
#include "engine.h"
#include "napi_util.h"
#include "runtime.h"

namespace wharf_node {
namespace {

void FreeAddonData(napi_env env, void* data, void*) {
  auto* addon = static_cast<AddonData*>(data);
  if (addon->error_factory != nullptr) napi_delete_reference(env, addon->error_factory);
  delete addon;
}

napi_value Init(napi_env env, napi_value exports) {
  napi_set_instance_data(env, new AddonData(), FreeAddonData, nullptr);
  RegisterEngine(env, exports);
  RegisterRuntime(env, exports);
  RegisterAdmin(env, exports);
  return exports;
}

}  // namespace
}  // namespace wharf_node

NAPI_MODULE(NODE_GYP_MODULE_NAME, wharf_node::Init)
