// The public Engine and Txn expose no internals (no core(), no EmitWithOrigin); the library's own
// layers reach them through EngineInternal (engine/core/engine_internal.h) alone.
#include "engine/core/engine_internal.h"

#include <gtest/gtest.h>

#include "engine/core/engine_core.h"
#include "tests/test_util.h"
#include "wharf/engine.h"

namespace wharf {
namespace {

using internal::EngineInternal;
using testing::TempDir;

// A public member naming the core would compile here; none may.
template <typename T>
concept ExposesCore = requires(const T& object) {
  object.core();
};
static_assert(!ExposesCore<Engine>, "wharf/engine.h must not expose the engine core");
static_assert(!ExposesCore<Txn>, "wharf/engine.h must not expose the engine core");

TEST(EngineInternalTest, ReachesTheCoreAndEmitsWithAnOrigin) {
  TempDir dir;
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(dir.db(), {}, &engine));
  ASSERT_OK(engine->DeclareTypes({"T"}));
  const std::shared_ptr<internal::EngineCore>& core = EngineInternal::Core(*engine);
  ASSERT_NE(core, nullptr);
  EXPECT_EQ(core->path(), engine->path());

  Txn txn = engine->Begin();
  EXPECT_EQ(EngineInternal::CoreOf(txn), core.get());
  ASSERT_NE(EngineInternal::Rep(txn), nullptr);
  ASSERT_OK(EngineInternal::EmitWithOrigin(txn, "T", "k", "p", {}, "projector", 3));
  Status s = EngineInternal::EmitWithOrigin(txn, "Undeclared", "k", "p", {}, "projector", 3);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();  // the checks of Txn::Emit
  EXPECT_EQ(txn.fact_count(), 1u);
  CommitResult result;
  ASSERT_OK(txn.Commit(&result));
  std::vector<Fact> facts;
  ASSERT_OK(engine->ReadFacts(engine->PartitionOf("k"), result.first_fact_id, 1, &facts));
  ASSERT_EQ(facts.size(), 1u);
  EXPECT_EQ(facts[0].source, "projector");
  EXPECT_EQ(facts[0].depth, 3u);
}

}  // namespace
}  // namespace wharf
