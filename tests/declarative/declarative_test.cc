// Declarative runtime: parsing the file format, the validation rules with
// their file:line:column errors, the proofs, and keyed partitioning from JSON payloads.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <set>

#include "engine/declarative/model.h"
#include "engine/declarative/yaml_tree.h"
#include "test_util.h"
#include "wharf.h"
#include "wharf/runtime.h"

namespace wharf::declarative {
namespace {

using wharf::testing::TempDir;

std::string Data(const std::string& name) {
  return std::string(WHARF_DECLARATIVE_DATA) + "/" + name;
}

// Parses and validates `yaml` as file "t.yaml"; returns every error's text.
std::vector<std::string> Errors(const std::string& yaml, Model* model_out = nullptr) {
  Model model;
  std::vector<Diagnostic> errors;
  ParseText(yaml, "t.yaml", &model, &errors);
  Validate(model, &errors);
  std::vector<std::string> texts;
  for (const Diagnostic& error : errors) texts.push_back(error.ToString());
  if (model_out != nullptr) *model_out = model;
  return texts;
}

::testing::AssertionResult HasError(const std::vector<std::string>& errors,
                                    const std::string& text) {
  if (std::find(errors.begin(), errors.end(), text) != errors.end()) {
    return ::testing::AssertionSuccess();
  }
  auto failure = ::testing::AssertionFailure() << "missing error: " << text << "\ngot:";
  for (const std::string& error : errors) failure << "\n  " << error;
  return failure;
}

// One valid input; `extra` lines are appended inside the input (6 spaces of indent).
constexpr const char* kPools = "pools:\n  pool.w:\n    workers: 2\n";

// Goal: the format's full example, unchanged as the file's first document, loads once the pool it
// names is declared (second document), with every field in the model.
TEST(DeclarativeTest, SeedFullExampleLoads) {
  Model model;
  std::vector<Diagnostic> errors;
  ASSERT_OK(LoadModel(Data("seed_full_example.yaml"), &model, &errors));
  ASSERT_TRUE(model.has_runtime);
  ASSERT_EQ(model.inputs.size(), 1u);
  const InputRuntime& input = model.inputs[0];
  EXPECT_EQ(input.Name(), "op.publish_order_event/input.publish_order_event.outbox");
  EXPECT_EQ(input.delivery, Delivery::kAtLeastOnce);
  EXPECT_EQ(input.partitioning, PartitionKind::kKeyed);
  ASSERT_EQ(input.mapping.size(), 1u);
  EXPECT_EQ(input.mapping[0].schema, "schema.OrderCreated");
  EXPECT_EQ(input.mapping[0].fields, std::vector<std::string>{"tenant_id"});
  EXPECT_EQ(input.ordering, OrderKind::kPartition);
  EXPECT_EQ(input.pool, "pool.outbox_workers");
  EXPECT_EQ(input.assignment, Assignment::kConsistentHash);
  ASSERT_TRUE(input.batching.has_value());
  EXPECT_EQ(input.batching->ordering, BatchOrdering::kPreserved);
  EXPECT_EQ(model.partitions, 8u);
  ASSERT_EQ(model.pools.size(), 1u);
  EXPECT_EQ(model.pools[0].workers, 3u);
  ASSERT_EQ(model.consumers.size(), 1u);
  EXPECT_EQ(model.consumers[0].kind, DeclaredConsumerKind::kSubscriber);
}

// Goal: the seed's example alone names a pool nobody declared: an error at the pool's value.
TEST(DeclarativeTest, SeedWithoutPoolIsUndeclaredPool) {
  Model model;
  std::vector<Diagnostic> errors;
  Status s = LoadModel(Data("seed_without_pool.yaml"), &model, &errors);
  ASSERT_TRUE(s.IsInvalidArgument());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].mark.line, 13);
  EXPECT_EQ(errors[0].mark.column, 17);
  EXPECT_NE(errors[0].message.find("pool 'pool.outbox_workers' is not declared"),
            std::string::npos);
}

// Goal: the same sections may also sit in one document.
TEST(DeclarativeTest, OneDocumentWithPools) {
  std::string yaml = std::string(kPools) +
                     "runtime:\n"
                     "  outboxes:\n"
                     "    op.a:\n"
                     "      in.a:\n"
                     "        delivery: at_most_once\n"
                     "        partitioning: {kind: none}\n"
                     "        ordering: global\n"
                     "        dispatch: {pool: pool.w, member_assignment: {kind: round_robin}}\n";
  EXPECT_TRUE(Errors(yaml).empty());
}

std::string Input(const std::string& body) {
  return std::string(kPools) +
         "runtime:\n"
         "  outboxes:\n"
         "    op.a:\n"
         "      in.a:\n" +
         body;
}

// Goal: an unknown key is reported at the key, naming the keys allowed there.
TEST(DeclarativeTest, RuleUnknownKey) {
  auto errors =
      Errors(Input("        delivery: at_least_once\n"
                   "        partitioning: {kind: none}\n"
                   "        ordering: none\n"
                   "        colour: blue\n"
                   "        dispatch: {pool: pool.w, member_assignment: {kind: "
                   "consistent_hash}}\n"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:11:9: unknown key 'colour' in input 'op.a/in.a' (expected: "
                       "delivery, partitioning, ordering, dispatch, acknowledge_on_success)"));
  EXPECT_EQ(errors.size(), 1u);
}

// Goal: a key repeated in one mapping is an error (yaml-cpp would silently keep both).
TEST(DeclarativeTest, RuleDuplicateKey) {
  auto errors =
      Errors(Input("        delivery: at_least_once\n"
                   "        partitioning: {kind: none}\n"
                   "        ordering: none\n"
                   "        ordering: global\n"
                   "        dispatch: {pool: pool.w, member_assignment: {kind: "
                   "consistent_hash}}\n"));
  EXPECT_TRUE(HasError(errors, "t.yaml:11:9: duplicate key 'ordering' (first at 10:9)"));
  EXPECT_EQ(errors.size(), 1u);
}

// Goal: a wrong enum value is reported at the value, with the allowed values.
TEST(DeclarativeTest, RuleWrongEnumValue) {
  auto errors =
      Errors(Input("        delivery: exactly_once\n"
                   "        partitioning: {kind: none}\n"
                   "        ordering: none\n"
                   "        dispatch: {pool: pool.w, member_assignment: {kind: "
                   "sticky}}\n"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:8:19: wrong value 'exactly_once' for delivery (expected "
                       "unspecified | at_most_once | at_least_once)"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:11:60: wrong value 'sticky' for member_assignment.kind "
                       "(expected consistent_hash | round_robin)"));
  EXPECT_EQ(errors.size(), 2u);
}

// Goal: kind keyed without a mapping is refused at `partitioning`.
TEST(DeclarativeTest, RuleKeyedNeedsMapping) {
  auto errors =
      Errors(Input("        delivery: at_least_once\n"
                   "        partitioning:\n"
                   "          kind: keyed\n"
                   "        ordering: partition\n"
                   "        dispatch: {pool: pool.w, member_assignment: {kind: "
                   "consistent_hash}}\n"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:9:9: input 'op.a/in.a': partitioning kind 'keyed' "
                       "requires a 'mapping' of each consumed schema to its key fields"));
  EXPECT_EQ(errors.size(), 1u);
}

// Goal: a mapping with kind none is refused at `mapping`.
TEST(DeclarativeTest, RuleMappingOnlyWhenKeyed) {
  auto errors =
      Errors(Input("        delivery: at_least_once\n"
                   "        partitioning:\n"
                   "          kind: none\n"
                   "          mapping: {schema.A: [id]}\n"
                   "        ordering: global\n"
                   "        dispatch: {pool: pool.w, member_assignment: {kind: "
                   "consistent_hash}}\n"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:11:11: input 'op.a/in.a': 'mapping' is only allowed with "
                       "partitioning kind 'keyed' (kind is 'none')"));
  EXPECT_EQ(errors.size(), 1u);
}

// Goal: every schema of a keyed mapping maps the same number of fields.
TEST(DeclarativeTest, RuleMappingArity) {
  auto errors =
      Errors(Input("        delivery: at_least_once\n"
                   "        partitioning:\n"
                   "          kind: keyed\n"
                   "          mapping:\n"
                   "            schema.A: [tenant_id]\n"
                   "            schema.B: [tenant_id, region]\n"
                   "        ordering: partition\n"
                   "        dispatch: {pool: pool.w, member_assignment: {kind: "
                   "consistent_hash}}\n"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:13:13: input 'op.a/in.a': schema 'schema.B' maps 2 "
                       "field(s) but schema 'schema.A' maps 1: every schema must map the "
                       "same arity"));
  EXPECT_EQ(errors.size(), 1u);
}

// Goal: ordering partition needs keyed partitioning.
TEST(DeclarativeTest, RulePartitionOrderingNeedsKeyed) {
  auto errors =
      Errors(Input("        delivery: at_least_once\n"
                   "        partitioning: {kind: none}\n"
                   "        ordering: partition\n"
                   "        dispatch: {pool: pool.w, member_assignment: {kind: "
                   "consistent_hash}}\n"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:10:9: input 'op.a/in.a': ordering 'partition' requires "
                       "keyed partitioning (kind is 'none')"));
  EXPECT_EQ(errors.size(), 1u);
}

// Goal: a batching stage must say how it treats order; there is no default.
TEST(DeclarativeTest, RuleBatchingNeedsOrdering) {
  auto errors =
      Errors(Input("        delivery: at_least_once\n"
                   "        partitioning: {kind: none}\n"
                   "        ordering: global\n"
                   "        dispatch:\n"
                   "          pool: pool.w\n"
                   "          member_assignment: {kind: consistent_hash}\n"
                   "          batching:\n"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:14:11: input 'op.a/in.a': a batching stage must declare "
                       "its 'ordering' explicitly (preserved | unspecified); there is no "
                       "default"));
  EXPECT_EQ(errors.size(), 1u);
}

// Goal: dispatch names a pool that `pools` declares.
TEST(DeclarativeTest, RuleUndeclaredPool) {
  auto errors =
      Errors(Input("        delivery: at_least_once\n"
                   "        partitioning: {kind: none}\n"
                   "        ordering: global\n"
                   "        dispatch:\n"
                   "          pool: pool.nope\n"
                   "          member_assignment: {kind: consistent_hash}\n"));
  EXPECT_TRUE(HasError(
      errors, "t.yaml:12:17: input 'op.a/in.a': pool 'pool.nope' is not declared under 'pools'"));
  EXPECT_EQ(errors.size(), 1u);
}

constexpr const char* kValidInput =
    "        delivery: at_least_once\n"
    "        partitioning: {kind: none}\n"
    "        ordering: global\n"
    "        dispatch: {pool: pool.w, member_assignment: {kind: consistent_hash}}\n";

// Goal: a consumer bound to an input nobody declared is refused at its `input` value.
TEST(DeclarativeTest, RuleConsumerUnknownInput) {
  auto errors = Errors(Input(kValidInput) +
                       "consumers:\n"
                       "  - {id: c1, kind: subscriber, input: op.a/in.a}\n"
                       "  - id: c2\n"
                       "    kind: projection\n"
                       "    input: op.a/in.zzz\n");
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:16:12: consumer 'c2' is bound to unknown input "
                       "'op.a/in.zzz' (expected <operation>/<input> declared under "
                       "runtime.outboxes)"));
  EXPECT_EQ(errors.size(), 1u);
}

// Goal: consumer ids are unique; the second is reported with the first's position.
TEST(DeclarativeTest, RuleDuplicateConsumerId) {
  auto errors = Errors(Input(kValidInput) +
                       "consumers:\n"
                       "  - {id: c1, kind: subscriber, input: op.a/in.a}\n"
                       "  - {id: c1, kind: reaction, input: op.a/in.a}\n");
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:14:10: duplicate consumer id 'c1' (first declared at "
                       "13:10)"));
  EXPECT_EQ(errors.size(), 1u);
}

// Goal: all errors of a file come at once, sorted by position (LoadModel's message too).
TEST(DeclarativeTest, AllErrorsAtOnce) {
  Model model;
  std::vector<Diagnostic> errors;
  Status s = LoadModel(Data("invalid_all.yaml"), &model, &errors);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_EQ(errors.size(), 10u);
  for (size_t i = 1; i < errors.size(); ++i) {
    EXPECT_LE(errors[i - 1].mark.line, errors[i].mark.line);
  }
  EXPECT_NE(s.message().find("invalid_all.yaml:25:19: wrong value 'exactly_once'"),
            std::string::npos);
}

// Goal: malformed YAML is one error at the parser's position; an unclosed bracket, noticed only
// where the text ends, also names where it opened.
TEST(DeclarativeTest, MalformedYamlHasPosition) {
  auto errors = Errors("runtime:\n  outboxes: [a, b\n  x: 1\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rfind("t.yaml:4:1: malformed YAML: ", 0), 0u) << errors[0];
  EXPECT_NE(errors[0].find("(the sequence opened at 2:13 is not closed)"), std::string::npos)
      << errors[0];
  errors = Errors("a: b: c\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rfind("t.yaml:1:5: malformed YAML: ", 0), 0u) << errors[0];
  Model model;
  std::vector<Diagnostic> diagnostics;
  EXPECT_TRUE(LoadModel(Data("malformed.yaml"), &model, &diagnostics).IsInvalidArgument());
  ASSERT_EQ(diagnostics.size(), 1u);
  EXPECT_EQ(diagnostics[0].mark.line, 7);
}

// Goal: no runtime section means "no usable runtime facts": valid, nothing to prove, and the
// engine and runtime options keep their defaults.
TEST(DeclarativeTest, NoRuntimeKeepsDefaults) {
  Model model;
  ASSERT_OK(LoadModel(Data("no_runtime.yaml"), &model));
  EXPECT_FALSE(model.has_runtime);
  EXPECT_TRUE(Prove(model).empty());
  EngineOptions engine_options;
  ASSERT_OK(LoadEngineOptions(Data("no_runtime.yaml"), &engine_options));
  EXPECT_EQ(engine_options.partitions, 0u);  // left to the stored value (16 at creation)
  EXPECT_FALSE(engine_options.key_from_payload);
  RuntimeOptions runtime_options;
  ASSERT_OK(LoadRuntimeOptions(Data("no_runtime.yaml"), &runtime_options));
  EXPECT_EQ(runtime_options.workers, 2u);
}

// Goal: `types:` declares payload versions; the listed upcasters must form one chain ending at
// version - 1, and each mistake is named at its line.
TEST(DeclarativeTest, TypeVersionsAndTheirUpcasterChains) {
  Model model;
  EXPECT_TRUE(Errors("types:\n"
                     "  OrderPlaced: {version: 3, upcasters: [1, 2]}\n"
                     "  OrderShipped: {version: 1}\n",
                     &model)
                  .empty());
  ASSERT_EQ(model.types.size(), 2u);
  EXPECT_EQ(model.types[0].name, "OrderPlaced");
  EXPECT_EQ(model.types[0].version, 3u);
  EXPECT_EQ(model.types[0].upcasters, (std::vector<uint32_t>{1, 2}));
  const std::vector<std::string> errors = Errors(
      "types:\n"
      "  A: {version: 4, upcasters: [1, 3]}\n"
      "  B: {version: 2, upcasters: [2]}\n"
      "  C: {version: 3, upcasters: [2, 2]}\n"
      "  D: {upcasters: [1]}\n"
      "  E: {version: 0}\n"
      "  F: {version: 2, colour: red}\n");
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:2:3: types.A: version 4 has no upcaster from version 2 to 3 "
                       "(the chain from 1 has a gap there)"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:3:31: types.B.upcasters: version 2 is the declared one; an upcaster "
                       "from 2 would lift past it"));
  EXPECT_TRUE(
      HasError(errors, "t.yaml:4:34: types.C.upcasters: the step from version 2 is listed twice"));
  EXPECT_TRUE(HasError(errors, "t.yaml:5:3: types.D: missing required key 'version'"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:6:16: types.E.version must be a whole number in [1, 4294967295], "
                       "not '0'"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:7:19: unknown key 'colour' in types.F (expected: version, "
                       "upcasters)"));
  EXPECT_EQ(errors.size(), 6u);
}

// Goal: an engine opened with `config=FILE` declares the file's types at their versions, and an
// open whose file would lower a declared version fails naming it.
TEST(DeclarativeTest, AnEngineDeclaresTheFilesTypesWhenItOpens) {
  TempDir dir;
  const std::string file = dir.path() + "/types.yaml";
  std::ofstream(file) << "types:\n  OrderPlaced: {version: 2}\n";
  EngineOptions options;
  ASSERT_OK(ParseEngineOptions("config=" + file, &options));
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(dir.db(), options, &engine));
  EXPECT_EQ(engine->DeclaredVersion("OrderPlaced"), 2u);
  ASSERT_OK(engine->DeclareType("OrderPlaced", 3));
  ASSERT_OK(engine->Close());
  engine.reset();
  Status s = Engine::Open(dir.db(), options, &engine);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("declaring the configured types: DeclareType('OrderPlaced', 2): the "
                             "type is declared at version 3"),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(engine, nullptr);
}

// Goal: `tables:` declares state tables' row versions; listed migrations must be exactly the
// chain 1 .. version - 1 (a table starts at version 1), and each mistake is named at its line.
TEST(DeclarativeTest, TableVersionsAndTheirMigrationChains) {
  Model model;
  EXPECT_TRUE(Errors("tables:\n"
                     "  accounts: {version: 3, migrations: [2, 1]}\n"
                     "  ledger: {version: 4}\n"
                     "  audit: {version: 1, migrations: []}\n",
                     &model)
                  .empty());
  ASSERT_EQ(model.tables.size(), 3u);
  EXPECT_EQ(model.tables[0].name, "accounts");
  EXPECT_EQ(model.tables[0].version, 3u);
  EXPECT_EQ(model.tables[0].migrations, (std::vector<uint32_t>{2, 1}));
  EXPECT_EQ(model.tables[1].name, "ledger");
  EXPECT_EQ(model.tables[1].version, 4u);  // no list: the steps are not checked
  EXPECT_FALSE(model.tables[1].has_migrations);
  EXPECT_EQ(model.tables[2].version, 1u);
  EXPECT_TRUE(model.types.empty());

  const std::string long_name(kTableBytesMax + 1, 'a');
  const std::vector<std::string> errors = Errors(
      "tables:\n"
      "  A: {version: 4, migrations: [1, 3]}\n"
      "  B: {version: 2, migrations: [1, 2]}\n"
      "  C: {version: 3, migrations: [1, 2, 2]}\n"
      "  D: {version: 0}\n"
      "  E: {version: 2, colour: red}\n"
      "  \"\": {version: 2}\n"  // a quoted key is marked after its quote
      "  F: {version: 3, migrations: []}\n"
      "  G: {version: 2, migrations: [1, 5]}\n"
      "  " +
      long_name +
      ": {version: 2}\n"
      "  H: {migrations: [1]}\n"
      "  I: {version: 2, migrations: 1}\n"
      "  \"a\\0b\": {version: 2}\n"
      "  J: {version: 3, migrations: [1, x]}\n");
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:2:19: tables.A.migrations: version 4 has no migration from version "
                       "2 to 3 (a table starts at version 1: the chain runs from 1 to 3)"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:3:35: tables.B.migrations: version 2 is the declared one; a "
                       "migration from 2 would lift past it"));
  EXPECT_TRUE(HasError(
      errors, "t.yaml:4:38: tables.C.migrations: the step from version 2 is listed twice"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:5:16: tables.D.version must be a whole number in [1, 4294967295], "
                       "not '0'"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:6:19: unknown key 'colour' in tables.E (expected: version, "
                       "migrations)"));
  EXPECT_TRUE(HasError(errors, "t.yaml:7:4: tables: table name is empty"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:8:19: tables.F.migrations: version 3 has no migration from version "
                       "1 to 2 (a table starts at version 1: the chain runs from 1 to 2)"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:9:35: tables.G.migrations: version 2 is the declared one; a "
                       "migration from 5 would lift past it"));
  EXPECT_TRUE(HasError(
      errors, "t.yaml:10:3: tables: table name of 256 bytes is longer than the limit of 255"));
  EXPECT_TRUE(HasError(errors, "t.yaml:11:3: tables.H: missing required key 'version'"));
  EXPECT_TRUE(
      HasError(errors, "t.yaml:12:19: tables.I.migrations must be a list of versions ([1, 2])"));
  EXPECT_TRUE(std::any_of(errors.begin(), errors.end(), [](const std::string& error) {
    return error.rfind("t.yaml:13:4: tables: table name ", 0) == 0 &&
           error.find("contains a NUL byte (at byte 1)") != std::string::npos;
  })) << ::testing::PrintToString(errors);
  // An entry that is no version is the one error of its list (no gap is judged without it).
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:14:35: tables.J.migrations[] must be a whole number in [1, "
                       "4294967295], not 'x'"));
  EXPECT_EQ(errors.size(), 13u) << ::testing::PrintToString(errors);
}

// Goal: an engine opened with `config=FILE` declares the file's tables at their versions (kept
// across opens, with or without the file), rows stored before are lifted by the migrations the
// application registers, and an open whose file would lower a declared version fails naming it.
TEST(DeclarativeTest, AnEngineDeclaresTheFilesTablesWhenItOpens) {
  TempDir dir;
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(dir.db(), EngineOptions(), &engine));
  ASSERT_OK(engine->Transact([](Txn& txn) { return txn.Put("accounts", "a-1", "v1"); }));
  ASSERT_OK(engine->Close());
  engine.reset();

  const std::string file = dir.path() + "/tables.yaml";
  std::ofstream(file) << "tables:\n"
                         "  accounts: {version: 3, migrations: [1, 2]}\n"
                         "  ledger:\n"
                         "    version: 2\n";
  EngineOptions options;
  ASSERT_OK(ParseEngineOptions("config=" + file, &options));
  ASSERT_EQ(options.tables.size(), 2u);
  ASSERT_OK(Engine::Open(dir.db(), options, &engine));
  EXPECT_EQ(engine->TableVersion("accounts"), 3u);
  EXPECT_EQ(engine->TableVersion("ledger"), 2u);
  EXPECT_EQ(engine->TableVersion("other"), 1u);
  std::vector<DeclaredTable> declared = engine->DeclaredTables();
  ASSERT_EQ(declared.size(), 2u);
  EXPECT_EQ(declared[0].name, "accounts");
  EXPECT_EQ(declared[0].version, 3u);
  EXPECT_EQ(declared[1].name, "ledger");
  EXPECT_EQ(declared[1].version, 2u);
  // The steps the file lists are the application's to register.
  ASSERT_OK(engine->RegisterMigration(
      "accounts", 1, [](std::string_view row) { return std::string(row) + "+2"; }));
  ASSERT_OK(engine->RegisterMigration(
      "accounts", 2, [](std::string_view row) { return std::string(row) + "+3"; }));
  std::string value;
  ASSERT_OK(engine->Get("accounts", "a-1", &value));
  EXPECT_EQ(value, "v1+2+3");
  ASSERT_OK(engine->Close());
  engine.reset();

  // Reopened with the file (declaring the versions it has: no change) and without it.
  ASSERT_OK(Engine::Open(dir.db(), options, &engine));
  EXPECT_EQ(engine->TableVersion("accounts"), 3u);
  EXPECT_EQ(engine->DeclaredTables().size(), 2u);
  ASSERT_OK(engine->Close());
  engine.reset();
  ASSERT_OK(Engine::Open(dir.db(), EngineOptions(), &engine));
  EXPECT_EQ(engine->TableVersion("accounts"), 3u);
  EXPECT_EQ(engine->TableVersion("ledger"), 2u);
  ASSERT_OK(engine->DeclareTable("accounts", 4));
  ASSERT_OK(engine->Close());
  engine.reset();

  Status s = Engine::Open(dir.db(), options, &engine);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("declaring the configured tables: DeclareTable('accounts', 3): the "
                             "table is declared at version 4"),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(engine, nullptr);
}

const Proof& Find(const std::vector<InputProofs>& all, const std::string& input,
                  const std::string& guarantee) {
  for (const InputProofs& proofs : all) {
    if (proofs.input != input) continue;
    for (const Proof& proof : proofs.proofs) {
      if (proof.guarantee == guarantee) return proof;
    }
  }
  static Proof none;
  ADD_FAILURE() << "no proof " << guarantee << " for " << input;
  return none;
}

class ProofTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(LoadModel(Data("proofs.yaml"), &model_));
    proofs_ = Prove(model_);
  }
  Model model_;
  std::vector<InputProofs> proofs_;
};

// Goal: delivery at_least_once (with acknowledge_on_success) and at_most_once are established;
// unspecified claims nothing.
TEST_F(ProofTest, Delivery) {
  const Proof& alo = Find(proofs_, "op.orders/input.global_plain", "delivery");
  EXPECT_EQ(alo.outcome, ProofOutcome::kEstablished);
  EXPECT_EQ(alo.scope, "at_least_once");
  EXPECT_NE(alo.reason.find("acknowledge_on_success"), std::string::npos);
  const Proof& amo = Find(proofs_, "op.orders/input.partition_preserved", "delivery");
  EXPECT_EQ(amo.outcome, ProofOutcome::kEstablished);
  EXPECT_EQ(amo.scope, "at_most_once");
  EXPECT_EQ(Find(proofs_, "op.orders/input.partition_unspecified", "delivery").outcome,
            ProofOutcome::kNotClaimed);
}

// Goal: at_most_once cannot be realized by a subscriber (Wharf redelivers to it until handled).
TEST(DeclarativeTest, DeliveryAtMostOnceFailsWithSubscriber) {
  Model model;
  ASSERT_TRUE(Errors(Input("        delivery: at_most_once\n"
                           "        partitioning: {kind: none}\n"
                           "        ordering: none\n"
                           "        dispatch: {pool: pool.w, member_assignment: {kind: "
                           "consistent_hash}}\n") +
                         "consumers:\n"
                         "  - {id: mailer, kind: subscriber, input: op.a/in.a}\n",
                     &model)
                  .empty());
  std::vector<InputProofs> proofs = Prove(model);
  const Proof& proof = Find(proofs, "op.a/in.a", "delivery");
  EXPECT_EQ(proof.outcome, ProofOutcome::kFailed);
  EXPECT_NE(proof.reason.find("'mailer' is a subscriber"), std::string::npos) << proof.reason;
}

// Goal: global ordering without batching is established globally.
TEST_F(ProofTest, OrderingGlobal) {
  const Proof& proof = Find(proofs_, "op.orders/input.global_plain", "ordering");
  EXPECT_EQ(proof.outcome, ProofOutcome::kEstablished);
  EXPECT_EQ(proof.scope, "global");
}

// Goal: an ordering proof accepts batching.ordering: preserved (per partition).
TEST_F(ProofTest, OrderingAcceptsPreservedBatching) {
  const Proof& proof = Find(proofs_, "op.orders/input.partition_preserved", "ordering");
  EXPECT_EQ(proof.outcome, ProofOutcome::kEstablished);
  EXPECT_EQ(proof.scope, "per partition");
  EXPECT_NE(proof.reason.find("preserved"), std::string::npos);
}

// Goal: an ordering proof fails on batching.ordering: unspecified, and precedence with it.
TEST_F(ProofTest, OrderingFailsOnUnspecifiedBatching) {
  const Proof& proof = Find(proofs_, "op.orders/input.partition_unspecified", "ordering");
  EXPECT_EQ(proof.outcome, ProofOutcome::kFailed);
  EXPECT_NE(proof.reason.find("unspecified"), std::string::npos);
  EXPECT_EQ(Find(proofs_, "op.orders/input.partition_unspecified", "precedence").outcome,
            ProofOutcome::kFailed);
}

// Goal: ordering none claims no order, no serialization, no precedence.
TEST_F(ProofTest, OrderingNone) {
  for (const char* guarantee : {"ordering", "serialization", "precedence"}) {
    EXPECT_EQ(Find(proofs_, "op.orders/input.unordered", guarantee).outcome,
              ProofOutcome::kNotClaimed)
        << guarantee;
  }
}

// Goal: any batching stage stops serialization, even one that preserves order; without batching
// it is established.
TEST_F(ProofTest, SerializationStoppedByBatching) {
  EXPECT_EQ(Find(proofs_, "op.orders/input.partition_preserved", "serialization").outcome,
            ProofOutcome::kFailed);
  EXPECT_EQ(Find(proofs_, "op.orders/input.partition_unspecified", "serialization").outcome,
            ProofOutcome::kFailed);
  EXPECT_EQ(Find(proofs_, "op.orders/input.global_plain", "serialization").outcome,
            ProofOutcome::kEstablished);
}

// Goal: precedence through redelivery and reassignment holds where ordering is established, and
// the reason states per consumer kind what a failure does (issue 16 item 13: it claimed that a
// failed item is always redelivered before later ones, false for projections, reactions,
// subscribers' kRejected and `dead retry`).
TEST_F(ProofTest, PrecedenceThroughRedeliveryAndReassignment) {
  const Proof& proof = Find(proofs_, "op.orders/input.partition_preserved", "precedence");
  EXPECT_EQ(proof.outcome, ProofOutcome::kEstablished);
  EXPECT_NE(proof.reason.find("round_robin"), std::string::npos);
  EXPECT_NE(proof.reason.find("re-emits a dead letter as a new fact with a later id"),
            std::string::npos)
      << proof.reason;
}

TEST(DeclarativeTest, PrecedenceStatesWhatEachConsumerKindDoesOnFailure) {
  std::string declared = std::string(kPools) +
                         "runtime:\n  outboxes:\n    op:\n      in:\n"
                         "        delivery: at_least_once\n"
                         "        partitioning: {kind: none}\n        ordering: global\n"
                         "        dispatch: {pool: pool.w, member_assignment: {kind: "
                         "consistent_hash}}\n";
  Model model;
  ASSERT_TRUE(Errors(declared + "consumers:\n  - {id: p, kind: projection, input: op/in}\n", &model)
                  .empty());
  std::string reason = Prove(model)[0].proofs[3].reason;
  EXPECT_NE(reason.find("projection: kRetry and transient store errors redeliver the item before "
                        "any later item"),
            std::string::npos)
      << reason;
  EXPECT_NE(reason.find("settle it as failed: it is dead-lettered and later items go on"),
            std::string::npos)
      << reason;
  EXPECT_EQ(reason.find("subscriber:"), std::string::npos) << reason;
  ASSERT_TRUE(Errors(declared + "consumers:\n  - {id: s, kind: subscriber, input: op/in}\n", &model)
                  .empty());
  reason = Prove(model)[0].proofs[3].reason;
  EXPECT_NE(reason.find("subscriber: kFailed, kRetry and a throw redeliver the item"),
            std::string::npos)
      << reason;
  EXPECT_NE(reason.find("kRejected dead-letters it and later items go on"), std::string::npos)
      << reason;
  EXPECT_EQ(reason.find("projection:"), std::string::npos) << reason;
  // The old, false claim is gone.
  EXPECT_EQ(reason.find("a failed item is redelivered before any later item"), std::string::npos)
      << reason;
}

// Goal: the key hook tuple-encodes the mapped fields in order (nested paths too), keeps the given
// key for unmapped types, and reports payloads that are not JSON or lack a field.
TEST(DeclarativeTest, KeyFromPayloadEncoding) {
  Model model;
  ASSERT_TRUE(Errors(Input("        delivery: at_least_once\n"
                           "        partitioning:\n"
                           "          kind: keyed\n"
                           "          mapping:\n"
                           "            schema.A: [tenant, customer.id]\n"
                           "            B: [t, c]\n"
                           "        ordering: partition\n"
                           "        dispatch: {pool: pool.w, member_assignment: {kind: "
                           "consistent_hash}}\n"),
                     &model)
                  .empty());
  KeyFromPayload hook = MakeKeyFromPayload(model);
  ASSERT_TRUE(hook);
  std::string key, error;
  ASSERT_TRUE(hook("A", R"({"customer": {"id": 7}, "tenant": "t1"})", &key, &error)) << error;
  EXPECT_EQ(key, "4:\"t1\"1:7");
  std::string key_b;
  ASSERT_TRUE(hook("B", R"({"t": "t1", "c": 7})", &key_b, &error)) << error;
  EXPECT_EQ(key_b, key);  // one key domain across schemas
  EXPECT_FALSE(hook("Other", "not json", &key, &error));
  EXPECT_TRUE(error.empty());
  EXPECT_FALSE(hook("A", R"({"tenant": "t1"})", &key, &error));
  EXPECT_EQ(error, "keyed partitioning: the payload has no field 'customer.id'");
  error.clear();
  EXPECT_FALSE(hook("A", "{not json", &key, &error));
  EXPECT_EQ(error.rfind("keyed partitioning: the payload is not JSON at 1:2 (byte 1)", 0), 0u)
      << error;
  error.clear();
  EXPECT_FALSE(hook("A", "{\"tenant\": \"t1\",\n \"customer\": {\"id\": 7,}}", &key, &error));
  EXPECT_EQ(error.rfind("keyed partitioning: the payload is not JSON at 2:23 (byte 39)", 0), 0u)
      << error;
}

// Goal: an engine and runtime configured from the seed's file: facts with the same tenant_id land
// in one partition whatever key the producer passed, are delivered in commit order, and a payload
// missing the field fails Emit with a clear InvalidArgument.
TEST(DeclarativeTest, KeyedOutboxEndToEnd) {
  TempDir dir;
  EngineOptions engine_options;
  ASSERT_OK(LoadEngineOptions(Data("seed_full_example.yaml"), &engine_options));
  EXPECT_EQ(engine_options.partitions, 8u);
  ASSERT_TRUE(engine_options.key_from_payload);
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(dir.db(), engine_options, &engine));
  ASSERT_OK(engine->DeclareTypes({"OrderCreated"}));

  RuntimeOptions runtime_options;
  ASSERT_OK(LoadRuntimeOptions(Data("seed_full_example.yaml"), &runtime_options));
  EXPECT_EQ(runtime_options.workers, 3u);

  std::mutex mutex;
  std::map<std::string, std::vector<int>> seen;          // tenant -> n in delivery order
  std::map<std::string, std::set<uint32_t>> partitions;  // tenant -> partitions seen
  {
    Runtime runtime(engine.get(), runtime_options);
    ASSERT_OK(runtime.Subscribe("order-events", {"OrderCreated"}, [&](const Fact& fact) {
      std::lock_guard lock(mutex);
      // The key is `<len>:"<tenant>"`; the payload's n follows the tenant.
      std::string tenant = fact.key.substr(fact.key.find(':') + 2);
      tenant.pop_back();
      seen[tenant].push_back(std::stoi(fact.payload.substr(fact.payload.rfind(':') + 1)));
      partitions[tenant].insert(fact.partition);
      return Outcome::kHandled;
    }));
    ASSERT_OK(runtime.Start());
    for (int n = 0; n < 60; ++n) {
      Txn txn = engine->Begin();
      std::string tenant = "t" + std::to_string(n % 5);
      // The producer's own key varies per fact: the declared mapping overrides it.
      ASSERT_OK(txn.Emit("OrderCreated", "k" + std::to_string(n),
                         R"({"tenant_id": ")" + tenant + R"(", "n": )" + std::to_string(n) + "}"));
      ASSERT_OK(txn.Commit());
    }
    Txn bad = engine->Begin();
    Status s = bad.Emit("OrderCreated", "k", R"({"n": 1})");
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.message().find("no field 'tenant_id'"), std::string::npos) << s.ToString();
    s = bad.Emit("OrderCreated", "k", "not json");
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.message().find("not JSON"), std::string::npos) << s.ToString();
    ASSERT_OK(runtime.Drain());
    ASSERT_OK(runtime.Stop());
  }
  ASSERT_EQ(seen.size(), 5u);
  for (const auto& [tenant, ns] : seen) {
    EXPECT_EQ(partitions[tenant].size(), 1u) << tenant;
    ASSERT_EQ(ns.size(), 12u) << tenant;
    EXPECT_TRUE(std::is_sorted(ns.begin(), ns.end())) << tenant;
  }
  ASSERT_OK(engine->Close());
}

// Goal: a consumer's options follow its input (seed: ordering partition), unknown ids are named.
TEST(DeclarativeTest, ConsumerOptionsFromFile) {
  ConsumerOptions options;
  options.ordering = Ordering::kGlobal;
  ASSERT_OK(LoadConsumerOptions(Data("seed_full_example.yaml"), "order-events", &options));
  EXPECT_EQ(options.consumer_id, "order-events");
  EXPECT_EQ(options.ordering, Ordering::kPartition);
  EXPECT_TRUE(LoadConsumerOptions(Data("seed_full_example.yaml"), "nope", &options).IsNotFound());
}

struct CliResult {
  int code = -1;
  std::string out;  // stdout and stderr
};

CliResult RunCheck(const std::string& args) {
  CliResult result;
  std::string command = std::string(WHARF_CLI_PATH) + " check " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) result.out.append(buffer, n);
  int status = pclose(pipe);
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// Goal: `wharf check` on the seed file exits 0 and states each guarantee with its outcome.
TEST(DeclarativeCliTest, CheckValidHuman) {
  CliResult r = RunCheck(Data("seed_full_example.yaml"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("valid"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("input op.publish_order_event/input.publish_order_event.outbox"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("serialization failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ordering      established per partition"), std::string::npos) << r.out;
}

// Goal: --json carries validity, the proofs and stable field names.
TEST(DeclarativeCliTest, CheckValidJson) {
  CliResult r = RunCheck(Data("seed_full_example.yaml") + " --json");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(R"("valid":true)"), std::string::npos) << r.out;
  EXPECT_NE(
      r.out.find(R"({"guarantee":"ordering","outcome":"established","scope":"per partition")"),
      std::string::npos)
      << r.out;
}

// Goal: an invalid file exits 1 with every error as file:line:column: message.
TEST(DeclarativeCliTest, CheckInvalid) {
  CliResult r = RunCheck(Data("invalid_all.yaml"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("invalid_all.yaml:25:19: wrong value 'exactly_once' for delivery"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("10 error(s)"), std::string::npos) << r.out;
  r = RunCheck(Data("malformed.yaml") + " --json");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(R"("valid":false)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(R"("line":7)"), std::string::npos) << r.out;
}

// Goal: no runtime declaration: "no usable runtime facts", exit 0.
TEST(DeclarativeCliTest, CheckNoRuntime) {
  CliResult r = RunCheck(Data("no_runtime.yaml"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("no usable runtime facts"), std::string::npos) << r.out;
}

// Goal: `--strict` and `--require GUARANTEE` make a guarantee that is not established fail the
// check (exit 4, each named on stderr), for CI; without them a valid file exits 0 as before, and
// an invalid file exits 1 whatever they ask.
TEST(DeclarativeCliTest, StrictAndRequireFailOnUnprovenGuarantees) {
  // proofs.yaml is valid; input.partition_unspecified's ordering proof fails (batching ordering
  // unspecified), input.unordered claims no ordering.
  CliResult r = RunCheck(Data("proofs.yaml"));
  EXPECT_EQ(r.code, 0) << r.out;
  r = RunCheck(Data("proofs.yaml") + " --strict");
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_NE(r.out.find("input op.orders/input.partition_unspecified: ordering is failed, not "
                       "established (--strict)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("input op.orders/input.unordered: ordering"), std::string::npos) << r.out;
  r = RunCheck(Data("proofs.yaml") + " --require ordering");
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_NE(r.out.find("input op.orders/input.unordered: ordering is not_claimed, not "
                       "established (--require ordering)"),
            std::string::npos)
      << r.out;
  // The full example proves its delivery and ordering, not serialization (a batching stage).
  EXPECT_EQ(RunCheck(Data("seed_full_example.yaml") + " --require delivery,ordering").code, 0);
  r = RunCheck(Data("seed_full_example.yaml") + " --require ordering --require serialization");
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_NE(r.out.find("serialization is failed, not established (--require serialization)"),
            std::string::npos)
      << r.out;
  r = RunCheck(Data("seed_full_example.yaml") + " --strict --json");
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_NE(r.out.find(R"("unproven":[{"input":"op.publish_order_event/)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(R"("asked":"--strict","guarantee":"serialization","outcome":"failed"})"),
            std::string::npos)
      << r.out;
  // No input declared: nothing is proven, so a required guarantee is not.
  EXPECT_EQ(RunCheck(Data("no_runtime.yaml") + " --strict").code, 0);
  r = RunCheck(Data("no_runtime.yaml") + " --require delivery");
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_NE(r.out.find("--require delivery: no input is declared"), std::string::npos) << r.out;
  // Invalid stays 1; an unknown guarantee is a usage error naming it.
  EXPECT_EQ(RunCheck(Data("invalid_all.yaml") + " --strict").code, 1);
  r = RunCheck(Data("proofs.yaml") + " --require exactly_once");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("exactly_once"), std::string::npos) << r.out;
}

// Goal: two inputs of one outbox that key one fact type by different fields, or declare different
// member_assignment kinds, are refused at file:line:column (the keying is one per outbox; one
// runtime assigns all its lanes one way). "schema.X" and "X" name one type: they were compared
// as written, so such a pair passed and the engine silently keyed by the first.
TEST(DeclarativeTest, InputsMustAgreeOnKeysAndAssignment) {
  Model model;
  std::vector<Diagnostic> diagnostics;
  Status s = LoadModel(Data("inputs_disagree.yaml"), &model, &diagnostics);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  std::vector<std::string> errors;
  for (const Diagnostic& diagnostic : diagnostics) errors.push_back(diagnostic.ToString());
  const std::string file = Data("inputs_disagree.yaml");
  EXPECT_EQ(errors.size(), 2u);
  EXPECT_TRUE(HasError(
      errors, file +
                  ":23:13: input 'op.orders/input.by_region': schema 'OrderCreated' keys fact "
                  "type 'OrderCreated' by [region], but input 'op.orders/input.by_customer' keys "
                  "it by [customer.id] (schema 'schema.OrderCreated' at line 12): one outbox "
                  "partitions each fact once, so every input must key a type by the same "
                  "fields"));
  EXPECT_TRUE(HasError(
      errors, file +
                  ":28:19: input 'op.orders/input.by_region': member_assignment 'round_robin', "
                  "but input 'op.orders/input.by_customer' declares 'consistent_hash' (line 17): "
                  "one runtime assigns the lanes of every input to its workers one way; declare "
                  "the same kind on every input"));
  // The runtime no longer replaces the assignment by the default: it refuses the file...
  RuntimeOptions runtime_options;
  runtime_options.assignment = Assignment::kConsistentHash;
  s = LoadRuntimeOptions(file, &runtime_options);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("inputs_disagree.yaml:28:19: "), std::string::npos) << s.message();
  // ... and honours it when the inputs agree (proofs.yaml: round_robin throughout).
  ASSERT_OK(LoadRuntimeOptions(Data("proofs.yaml"), &runtime_options));
  EXPECT_EQ(runtime_options.assignment, Assignment::kRoundRobin);
  CliResult r = RunCheck(file);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("inputs_disagree.yaml:23:13: "), std::string::npos) << r.out;

  // Within one input too; the same fields under both spellings agree.
  auto within =
      Errors(Input("        delivery: at_least_once\n"
                   "        partitioning: {kind: keyed, mapping: {schema.A: [t], A: [u]}}\n"
                   "        ordering: partition\n"
                   "        dispatch: {pool: pool.w, member_assignment: {kind: "
                   "round_robin}}\n"));
  ASSERT_EQ(within.size(), 1u);
  EXPECT_NE(within[0].find("t.yaml:9:62: input 'op.a/in.a': schema 'A' keys fact type 'A' by [u], "
                           "but this input keys it by [t]"),
            std::string::npos)
      << within[0];
  EXPECT_TRUE(Errors(Input("        delivery: at_least_once\n"
                           "        partitioning: {kind: keyed, mapping: {schema.A: [t], A: [t]}}\n"
                           "        ordering: partition\n"
                           "        dispatch: {pool: pool.w, member_assignment: {kind: "
                           "round_robin}}\n"))
                  .empty());
}

// The same file configures the engine through the option vocabulary shared by every interface:
// `config=FILE` in the C++ option string and in the C ABI's wharf_open options.
TEST(DeclarativeConfigOption, ConfiguresTheEngineThroughOptionStringsAndTheCAbi) {
  EngineOptions options;
  ASSERT_OK(ParseEngineOptions("config=" + Data("seed_full_example.yaml"), &options));
  EXPECT_EQ(options.partitions, 8u);
  EXPECT_TRUE(static_cast<bool>(options.key_from_payload));
  Status bad = ParseEngineOptions("config=" + Data("invalid_all.yaml"), &options);
  EXPECT_TRUE(bad.IsInvalidArgument()) << bad.ToString();
  EXPECT_NE(bad.message().find("invalid_all.yaml:"), std::string::npos) << bad.ToString();
  RuntimeOptions runtime_options;
  ASSERT_OK(ParseRuntimeOptions("config=" + Data("seed_full_example.yaml"), &runtime_options));

  wharf::testing::TempDir dir;
  std::string open_options = "config=" + Data("seed_full_example.yaml");
  wharf_engine* engine = nullptr;
  ASSERT_EQ(wharf_open(dir.db().c_str(), open_options.c_str(), &engine), WHARF_OK)
      << wharf_last_error();
  const char* types[] = {"OrderCreated"};
  ASSERT_EQ(wharf_declare_types(engine, types, 1), WHARF_OK) << wharf_last_error();
  wharf_txn* txn = nullptr;
  ASSERT_EQ(wharf_txn_begin(engine, &txn), WHARF_OK);
  std::string good = R"({"tenant_id":"t1","total":3})", missing = R"({"total":3})";
  EXPECT_EQ(wharf_txn_emit(txn, "OrderCreated", "", 0, good.data(), good.size()), WHARF_OK)
      << wharf_last_error();
  EXPECT_EQ(wharf_txn_emit(txn, "OrderCreated", "", 0, missing.data(), missing.size()),
            WHARF_INVALID_ARGUMENT);
  EXPECT_NE(std::string(wharf_last_error()).find("tenant_id"), std::string::npos)
      << wharf_last_error();
  uint64_t last_id = 0;
  EXPECT_EQ(wharf_txn_commit(txn, &last_id), WHARF_OK) << wharf_last_error();
  EXPECT_EQ(last_id, 1u);
  EXPECT_EQ(wharf_close(engine), WHARF_OK);

  // The file's `outbox.partitions` is explicit: it must agree with an existing database.
  ASSERT_EQ(wharf_open(dir.db().c_str(), open_options.c_str(), &engine), WHARF_OK)
      << wharf_last_error();
  EXPECT_EQ(wharf_close(engine), WHARF_OK);
  wharf::testing::TempDir four;
  ASSERT_EQ(wharf_open(four.db().c_str(), "partitions=4", &engine), WHARF_OK);
  EXPECT_EQ(wharf_close(engine), WHARF_OK);
  EXPECT_EQ(wharf_open(four.db().c_str(), open_options.c_str(), &engine), WHARF_INVALID_ARGUMENT);
  EXPECT_NE(std::string(wharf_last_error()).find("database has 4 partitions; partitions=8"),
            std::string::npos)
      << wharf_last_error();
  // Also when it names the creation default (16), which was taken for "not chosen"; a file
  // without `outbox.partitions` takes the stored count.
  std::string sixteen = four.path() + "/sixteen.yaml";
  std::ofstream(sixteen) << "outbox:\n  partitions: 16\n";
  std::string sixteen_options = "config=" + sixteen;
  EXPECT_EQ(wharf_open(four.db().c_str(), sixteen_options.c_str(), &engine),
            WHARF_INVALID_ARGUMENT);
  EXPECT_NE(std::string(wharf_last_error()).find("database has 4 partitions; partitions=16"),
            std::string::npos)
      << wharf_last_error();
  std::string no_outbox = "config=" + Data("no_runtime.yaml");
  ASSERT_EQ(wharf_open(four.db().c_str(), no_outbox.c_str(), &engine), WHARF_OK)
      << wharf_last_error();
  uint32_t partitions = 0;
  EXPECT_EQ(wharf_partitions(engine, &partitions), WHARF_OK);
  EXPECT_EQ(partitions, 4u);
  EXPECT_EQ(wharf_close(engine), WHARF_OK);
}

// Hostile input (issue 17, failure 5). Each of these hung, or grew without bound, with yaml-cpp:
// a file holding only `,`, a "billion laughs" file, deep nesting. Every one is now one error naming
// file:line:column, found in time linear in the text.
TEST(DeclarativeHostileTest, LoneCommaIsOneErrorNotAHang) {
  auto errors = Errors(",");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rfind("t.yaml:1:1: malformed YAML: ", 0), 0u) << errors[0];
  errors = Errors("runtime:\n  ,\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rfind("t.yaml:2:", 0), 0u) << errors[0];
}

// Found by tests/fuzz/fuzz_yaml: libfyaml 0.7.12 loops forever on invalid UTF-8 in a directive.
// The text is checked first; the error names the first bad byte.
TEST(DeclarativeHostileTest, InvalidUtf8IsOneErrorNotAHang) {
  auto errors = Errors(
      "runtime:\n  outboxes:\n%   op\xbe"
      "event:\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "t.yaml:3:7: the file is not valid UTF-8 (byte 27)");
  errors = Errors("%\xbe");
  ASSERT_EQ(errors.size(), 1u);
  for (const char* bad : {"\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82"}) {
    errors = Errors(std::string("a: ") + bad + "\n");
    ASSERT_EQ(errors.size(), 1u) << bad;
    EXPECT_EQ(errors[0], "t.yaml:1:4: the file is not valid UTF-8 (byte 3)");
  }
  // Valid multi-byte text parses (and is then merely an unknown key).
  errors = Errors("caf\xc3\xa9: \xf0\x9f\x9a\xa2\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("unknown key 'caf\xc3\xa9'"), std::string::npos) << errors[0];
}

// The same file through every interface that loads one: the option string and the C ABI.
TEST(DeclarativeHostileTest, LoneCommaFileIsRefusedByWharfOpen) {
  TempDir dir;
  std::string path = dir.path() + "/comma.yaml";
  FILE* file = std::fopen(path.c_str(), "w");
  ASSERT_NE(file, nullptr);
  std::fputs(",", file);
  std::fclose(file);
  EngineOptions options;
  Status s = ParseEngineOptions("config=" + path, &options);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find(path + ":1:1: malformed YAML"), std::string::npos) << s.ToString();
  std::string open_options = "config=" + path;
  wharf_engine* engine = nullptr;
  EXPECT_EQ(wharf_open(dir.db().c_str(), open_options.c_str(), &engine), WHARF_INVALID_ARGUMENT);
  EXPECT_NE(std::string(wharf_last_error()).find(":1:1: malformed YAML"), std::string::npos)
      << wharf_last_error();
  CliResult r = RunCheck(path);
  EXPECT_EQ(r.code, 1) << r.out;
}

TEST(DeclarativeHostileTest, AnchorsAndAliasesAreRefused) {
  std::string laughs = "a0: &a0 [lol, lol]\n";
  for (int level = 1; level < 30; ++level) {
    std::string prev = "*a" + std::to_string(level - 1);
    laughs += "a" + std::to_string(level) + ": &a" + std::to_string(level) + " [" + prev + ", " +
              prev + "]\n";
  }
  auto errors = Errors(laughs);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0],
            "t.yaml:1:6: anchors (&name) and aliases (*name) are not supported in a declarative "
            "file");
  // An alias without any anchor, and an anchor on a scalar, are refused the same way.
  errors = Errors("outbox:\n  partitions: *n\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rfind("t.yaml:2:16: anchors", 0), 0u) << errors[0];
  errors = Errors("outbox:\n  partitions: &n 4\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rfind("t.yaml:2:16: anchors", 0), 0u) << errors[0];
}

TEST(DeclarativeHostileTest, NestingIsBounded) {
  auto errors = Errors(std::string(100000, '['));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "t.yaml:1:" + std::to_string(kMaxYamlDepth + 1) + ": nesting deeper than " +
                           std::to_string(kMaxYamlDepth) + " levels");
  std::string block;
  for (int depth = 0; depth < 1000; ++depth) block += std::string(depth, ' ') + "k:\n";
  errors = Errors(block);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("nesting deeper than"), std::string::npos) << errors[0];
  // The deepest nesting still allowed parses (and is then merely an unknown key).
  std::string allowed = std::string(kMaxYamlDepth, '[') + std::string(kMaxYamlDepth, ']');
  errors = Errors(allowed);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("must be a mapping of sections"), std::string::npos) << errors[0];
}

TEST(DeclarativeHostileTest, SizeIsBounded) {
  std::string big = "# " + std::string(kMaxYamlBytes, 'x') + "\n";
  auto errors = Errors(big);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "t.yaml:1:1: the file is larger than " + std::to_string(kMaxYamlBytes) +
                           " bytes, the limit of a declarative file");
  // The parser may not run further than kMaxYamlLookaheadBytes ahead of its last node: a scalar
  // that long is refused (an unclosed run of brackets made libfyaml hold the whole text).
  errors =
      Errors("outbox:\n  partitions: \"" + std::string(2 * kMaxYamlLookaheadBytes, '1') + "\"\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rfind("t.yaml:2:3: more than " + std::to_string(kMaxYamlLookaheadBytes) +
                                " bytes without a complete YAML node",
                            0),
            0u)
      << errors[0];
  TempDir dir;
  std::string path = dir.path() + "/big.yaml";
  FILE* file = std::fopen(path.c_str(), "w");
  ASSERT_NE(file, nullptr);
  std::fwrite(big.data(), 1, big.size(), file);
  std::fclose(file);
  Model model;
  std::vector<Diagnostic> diagnostics;
  Status s = LoadModel(path, &model, &diagnostics);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("big.yaml:1:1: the file is larger than"), std::string::npos)
      << s.ToString();
}

// Many inputs, each looked up by name: these look-ups were linear, making the whole file quadratic
// (40 000 outboxes took 12.9 s). The time is measured in bench/declarative_bench.cc; here, that a
// large file (near the size limit) loads, with every input and consumer.
TEST(DeclarativeHostileTest, LargeFileLoadsWhole) {
  std::string yaml = "pools:\n  p: {workers: 1}\nruntime:\n  outboxes:\n";
  std::string consumers = "consumers:\n";
  constexpr int kInputs = 5000;
  for (int i = 0; i < kInputs; ++i) {
    std::string op = "op" + std::to_string(i);
    yaml += "    " + op +
            ":\n      in: {delivery: at_least_once, partitioning: {kind: none}, ordering: "
            "global, dispatch: {pool: p, member_assignment: {kind: round_robin}}}\n";
    consumers += "  - {id: c" + std::to_string(i) + ", kind: subscriber, input: " + op + "/in}\n";
  }
  Model model;
  auto errors = Errors(yaml + consumers, &model);
  EXPECT_TRUE(errors.empty()) << errors.front();
  EXPECT_EQ(model.inputs.size(), static_cast<size_t>(kInputs));
  EXPECT_EQ(model.consumers.size(), static_cast<size_t>(kInputs));
  std::vector<InputProofs> proofs = Prove(model);
  ASSERT_EQ(proofs.size(), static_cast<size_t>(kInputs));
  EXPECT_EQ(proofs.back().consumers, std::vector<std::string>{"c" + std::to_string(kInputs - 1)});
  // A duplicate among many is still found.
  errors = Errors(yaml + "    op17:\n      in: {}\n");
  EXPECT_TRUE(HasError(errors, "t.yaml:" + std::to_string(4 + 2 * kInputs + 1) +
                                   ":5: duplicate key 'op17' (first at 39:5)"));
}

// A directory is not a declarative file: it read as empty and so "valid" (issue 17).
TEST(DeclarativeHostileTest, DirectoryIsRefusedEverywhere) {
  TempDir dir;
  Model model;
  std::vector<Diagnostic> diagnostics;
  Status s = LoadModel(dir.path(), &model, &diagnostics);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(s.message(), dir.path() + ":0:0: is a directory, not a declarative file");
  EngineOptions options;
  s = ParseEngineOptions("config=" + dir.path(), &options);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("is a directory"), std::string::npos) << s.ToString();
  RuntimeOptions runtime_options;
  s = ParseRuntimeOptions("config=" + dir.path(), &runtime_options);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  std::string open_options = "config=" + dir.path();
  wharf_engine* engine = nullptr;
  EXPECT_EQ(wharf_open(dir.db().c_str(), open_options.c_str(), &engine), WHARF_INVALID_ARGUMENT);
  EXPECT_EQ(engine, nullptr);
  EXPECT_NE(std::string(wharf_last_error()).find("is a directory"), std::string::npos)
      << wharf_last_error();
  CliResult r = RunCheck(dir.path());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("is a directory, not a declarative file"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("valid"), std::string::npos) << r.out;
  r = RunCheck("/dev/null");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("/dev/null:0:0: is not a regular file"), std::string::npos) << r.out;
  r = RunCheck(dir.path() + "/absent.yaml");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("absent.yaml:0:0: cannot read the file"), std::string::npos) << r.out;
}

// Relays (issue 23) and member_concurrency (issue 22) in the file.

// Two inputs, `op.a/in.k` (keyed: schema.A and B on [t]; ordering partition) and `op.a/in.g`
// (unkeyed; ordering global), on pool.w (2 workers); `consumers` start at line 18.
std::string WithConsumers(const std::string& consumers, const std::string& pools = kPools) {
  return pools +
         "runtime:\n"
         "  outboxes:\n"
         "    op.a:\n"
         "      in.k:\n"
         "        delivery: at_least_once\n"
         "        partitioning: {kind: keyed, mapping: {schema.A: [t], B: [t]}}\n"
         "        ordering: partition\n"
         "        dispatch: {pool: pool.w, member_assignment: {kind: consistent_hash}}\n"
         "      in.g:\n"
         "        delivery: at_least_once\n"
         "        partitioning: {kind: none}\n"
         "        ordering: global\n"
         "        dispatch: {pool: pool.w, member_assignment: {kind: consistent_hash}}\n"
         "consumers:\n" +
         consumers;
}

// Goal: a relay's options go through the relay's own parser, each error at its key's
// line:column naming it; the consumer's own options are refused inside `relay:` with where they
// go; a value with ';' and blanks is fine (no option string is built).
TEST(DeclarativeRelayTest, BadOptionsAreReportedAtTheirKeys) {
  auto errors =
      Errors(WithConsumers("  - id: r1\n"
                           "    kind: relay\n"
                           "    input: op.a/in.k\n"
                           "    relay:\n"
                           "      kind: redis_streams\n"
                           "      maxlen: lots\n"
                           "      shard: 3\n"
                           "      ordering: global\n"
                           "      url: \"redis://u:p@host\"\n"
                           "      password: \"a;b c\"\n"));
  EXPECT_TRUE(HasError(
      errors, "t.yaml:23:7: relay 'r1': relay options: maxlen='lots' is not a number >= 0"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:24:7: relay 'r1': relay options: unknown key 'shard' for "
                       "kind=redis_streams (url, stream, user, password, timeout_ms, in_flight, "
                       "maxlen)"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:25:7: relay 'r1': 'ordering' is not a relay option in a declarative "
                       "file: the cursor name is the consumer's 'id', 'batch_facts' is a consumer "
                       "field, and the ordering is its input's"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:26:7: relay 'r1': relay options: url='redis://u:p@host' is not "
                       "redis://HOST[:PORT] (credentials go in user/password)"));
  EXPECT_EQ(errors.size(), 4u);
}

// Goal: a template that would let several partition lanes share a stream or subject is refused
// at the template's key unless the input's ordering is global (one lane); the sink's own check,
// without a connection.
TEST(DeclarativeRelayTest, TemplateFollowsTheInputsOrdering) {
  auto errors =
      Errors(WithConsumers("  - id: r2\n"
                           "    kind: relay\n"
                           "    input: op.a/in.k\n"
                           "    relay:\n"
                           "      kind: nats_jetstream\n"
                           "      subject: \"orders.{type}\"\n"
                           "  - id: r3\n"
                           "    kind: relay\n"
                           "    input: op.a/in.g\n"
                           "    types: [A]\n"
                           "    relay: {kind: nats_jetstream, subject: \"orders.{type}\"}\n"));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rfind("t.yaml:23:7: relay 'r2': subject='orders.{type}' would let the lanes "
                            "of several partitions publish to one subject",
                            0),
            0u)
      << errors[0];
  EXPECT_NE(errors[0].find("(ordering comes from input 'op.a/in.k': partition)"), std::string::npos)
      << errors[0];
}

// Goal: the fields a relay needs, and those only a relay takes, each reported where it is.
TEST(DeclarativeRelayTest, RelayFieldsAndTypes) {
  auto errors =
      Errors(WithConsumers("  - id: r3\n"                        // 18
                           "    kind: relay\n"                   // 19
                           "    input: op.a/in.g\n"              // 20
                           "    relay:\n"                        // 21
                           "      url: redis://h\n"              // 22
                           "  - id: r4\n"                        // 23
                           "    kind: relay\n"                   // 24
                           "    input: op.a/in.g\n"              // 25
                           "    types: [A]\n"                    // 26
                           "  - id: r5\n"                        // 27
                           "    kind: subscriber\n"              // 28
                           "    input: op.a/in.k\n"              // 29
                           "    types: [A]\n"                    // 30
                           "    relay: {kind: redis_streams}\n"  // 31
                           "  - id: r6\n"                        // 32
                           "    kind: relay\n"                   // 33
                           "    input: op.a/in.k\n"              // 34
                           "    types: [A, C]\n"                 // 35
                           "    relay: {kind: redis_streams}\n"  // 36
                           "  - id: r7\n"                        // 37
                           "    kind: relay\n"                   // 38
                           "    input: op.a/in.g\n"              // 39
                           "    relay: {kind: kafka}\n"          // 40
                           "  - id: r8\n"                        // 41
                           "    kind: relay\n"                   // 42
                           "    input: op.a/in.k\n"              // 43
                           "    types: [A, A]\n"                 // 44
                           "    batch_facts: 0\n"                // 45
                           "    relay: {kind: redis_streams}\n"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:19:5: relay 'r3': missing required key 'types' (input 'op.a/in.g' "
                       "is not keyed, so no mapping names the fact types it takes)"));
  EXPECT_TRUE(HasError(
      errors,
      "t.yaml:21:5: relay 'r3': relay options: kind is missing (redis_streams or nats_jetstream)"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:24:5: relay 'r4': missing required key 'relay' (its options: kind, "
                       "url, stream or subject, ...; wharf/relay.h)"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:30:5: subscriber 'r5': 'types' is read only for relays (this "
                       "consumer takes the types its code registers)"));
  EXPECT_TRUE(
      HasError(errors, "t.yaml:31:5: subscriber 'r5': 'relay' options are only for kind 'relay'"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:35:16: relay 'r6' takes type 'C', which keyed input 'op.a/in.k' "
                       "does not map (it maps: A, B); the input admits only the schemas it maps"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:38:5: relay 'r7': missing required key 'types' (input 'op.a/in.g' "
                       "is not keyed, so no mapping names the fact types it takes)"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:40:13: relay 'r7': relay options: kind='kafka' is not one of "
                       "redis_streams, nats_jetstream"));
  EXPECT_TRUE(HasError(errors, "t.yaml:44:16: types: 'A' is listed twice"));
  EXPECT_TRUE(
      HasError(errors, "t.yaml:45:18: batch_facts must be a whole number in [1, 65536], not '0'"));
  EXPECT_EQ(errors.size(), 10u);
}

// Goal: a relay's secrets never reach an error, whatever is wrong around them.
TEST(DeclarativeRelayTest, SecretsAreNeverQuoted) {
  auto errors = Errors(
      WithConsumers("  - id: r1\n"
                    "    kind: relay\n"
                    "    input: op.a/in.k\n"
                    "    relay:\n"
                    "      kind: nats_jetstream\n"
                    "      password: hunter2\n"
                    "      token: [hunter3]\n"
                    "      \"\": hunter4\n"
                    "      timeout_ms: 0\n"
                    "      user: hunter5\n"
                    "  - id: r1\n"
                    "    kind: relay\n"
                    "    input: op.a/in.k\n"
                    "    relay: {kind: redis_streams, password: hunter6, paswd: hunter7}\n"));
  EXPECT_GE(errors.size(), 5u);
  for (const std::string& error : errors) {
    EXPECT_EQ(error.find("hunter"), std::string::npos) << error;
  }
  EXPECT_TRUE(HasError(errors, "t.yaml:24:14: relay option 'token' must be a scalar value"));
  EXPECT_TRUE(HasError(errors, "t.yaml:25:8: relay 'r1': a relay option has an empty key"));
}

// Goal: member_concurrency is a pool's, 1..4096; it reaches a subscriber as
// key_concurrency, and refuses what it cannot mean (a global order, projections, relays).
TEST(DeclarativeMemberConcurrencyTest, AcceptedOnThePoolAndBounded) {
  Model model;
  std::vector<Diagnostic> diagnostics;
  ASSERT_OK(LoadModel(Data("relay.yaml"), &model, &diagnostics));
  ASSERT_EQ(model.pools.size(), 2u);
  EXPECT_EQ(model.pools[0].member_concurrency, 1u);
  EXPECT_EQ(model.pools[1].member_concurrency, 8u);
  ConsumerOptions options;
  ASSERT_OK(LoadConsumerOptions(Data("relay.yaml"), "notifier", &options));
  EXPECT_EQ(options.key_concurrency, 8u);
  EXPECT_EQ(options.ordering, Ordering::kPartition);
  ConsumerOptions relay;
  ASSERT_OK(LoadConsumerOptions(Data("relay.yaml"), "orders-to-redis", &relay));
  EXPECT_EQ(relay.key_concurrency, 1u);
  EXPECT_EQ(relay.batch_facts, 64u);
  EXPECT_EQ(relay.consumer_id, "orders-to-redis");

  for (const char* bad : {"0", "4097", "many"}) {
    auto errors = Errors(WithConsumers(
        "",
        std::string("pools:\n  pool.w:\n    workers: 2\n    member_concurrency: ") + bad + "\n"));
    ASSERT_EQ(errors.size(), 1u) << bad;
    EXPECT_EQ(errors[0], std::string("t.yaml:4:25: member_concurrency must be a whole number in "
                                     "[1, 4096], not '") +
                             bad + "'");
  }
  // Under `dispatch` it is an unknown key: the pool owns it.
  auto errors =
      Errors(Input("        delivery: at_least_once\n"
                   "        partitioning: {kind: none}\n"
                   "        ordering: none\n"
                   "        dispatch: {pool: pool.w, member_assignment: {kind: round_robin}, "
                   "member_concurrency: 4}\n"));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("unknown key 'member_concurrency' in dispatch"), std::string::npos)
      << errors[0];

  std::string pools = "pools:\n  pool.w:\n    workers: 2\n    member_concurrency: 4\n";
  errors =
      Errors(WithConsumers("  - {id: s, kind: subscriber, input: op.a/in.k}\n"
                           "  - id: p\n"
                           "    kind: projection\n"
                           "    input: op.a/in.k\n"
                           "  - id: r\n"
                           "    kind: relay\n"
                           "    input: op.a/in.k\n"
                           "    relay: {kind: redis_streams}\n",
                           pools));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:17:26: input 'op.a/in.g': ordering 'global' is one lane delivering "
                       "every fact in id order, but pool 'pool.w' declares member_concurrency 4 "
                       "(facts of different keys at once): use ordering 'partition', or a pool "
                       "with member_concurrency 1"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:22:12: projection 'p' is bound to input 'op.a/in.k', whose pool "
                       "'pool.w' declares member_concurrency 4, which only subscribers take: its "
                       "effects commit with its cursor a batch at a time, in id order (bind it to "
                       "an input of a pool with member_concurrency 1)"));
  EXPECT_TRUE(HasError(errors,
                       "t.yaml:25:12: relay 'r' is bound to input 'op.a/in.k', whose pool "
                       "'pool.w' declares member_concurrency 4, which only subscribers take: a "
                       "relay publishes its lane's facts in id order, a batch at a time (a "
                       "stream's entry ids only grow) (bind it to an input of a pool with "
                       "member_concurrency 1)"));
  EXPECT_EQ(errors.size(), 3u);
}

const Proof& ProofOf(const InputProofs& input, const std::string& guarantee) {
  for (const Proof& proof : input.proofs) {
    if (proof.guarantee == guarantee) return proof;
  }
  static const Proof kMissing;
  ADD_FAILURE() << "no proof " << guarantee;
  return kMissing;
}

// Goal: with member_concurrency > 1 the serialization proof stops (facts of different keys
// overlap) while the ordering proof holds per key; with 1, both hold per partition.
TEST(DeclarativeMemberConcurrencyTest, ProofsStopAndHold) {
  Model model;
  std::vector<Diagnostic> diagnostics;
  ASSERT_OK(LoadModel(Data("relay.yaml"), &model, &diagnostics));
  std::vector<InputProofs> proofs = Prove(model);
  ASSERT_EQ(proofs.size(), 2u);
  const InputProofs& orders = proofs[0];
  const InputProofs& notify = proofs[1];
  ASSERT_EQ(notify.input, "op.orders/input.notify");
  EXPECT_EQ(notify.member_concurrency, 8u);
  EXPECT_EQ(orders.member_concurrency, 1u);

  EXPECT_EQ(ProofOf(orders, "serialization").outcome, ProofOutcome::kEstablished);
  EXPECT_EQ(ProofOf(orders, "serialization").scope, "per partition");
  EXPECT_EQ(ProofOf(orders, "ordering").scope, "per partition");

  const Proof& serialization = ProofOf(notify, "serialization");
  EXPECT_EQ(serialization.outcome, ProofOutcome::kFailed);
  EXPECT_NE(serialization.reason.find("member_concurrency 8 (pool 'pool.fanout'): up to that many "
                                      "facts of different keys of one lane run at once"),
            std::string::npos)
      << serialization.reason;
  const Proof& ordering = ProofOf(notify, "ordering");
  EXPECT_EQ(ordering.outcome, ProofOutcome::kEstablished);
  EXPECT_EQ(ordering.scope, "per key");
  EXPECT_NE(
      ordering.reason.find("the facts of one key never overlap and are delivered in id order"),
      std::string::npos)
      << ordering.reason;
  const Proof& precedence = ProofOf(notify, "precedence");
  EXPECT_EQ(precedence.scope, "per key");
  EXPECT_NE(precedence.reason.find("holds back only the later items of its key"), std::string::npos)
      << precedence.reason;

  // A batching stage stops serialization whatever member_concurrency says.
  auto errors =
      Errors(Input("        delivery: at_least_once\n"
                   "        partitioning: {kind: keyed, mapping: {A: [t]}}\n"
                   "        ordering: partition\n"
                   "        dispatch: {pool: pool.w, member_assignment: {kind: round_robin}, "
                   "batching: {ordering: preserved}}\n"),
             &model);
  ASSERT_TRUE(errors.empty()) << errors[0];
  proofs = Prove(model);
  EXPECT_EQ(ProofOf(proofs[0], "serialization").outcome, ProofOutcome::kFailed);
  EXPECT_NE(ProofOf(proofs[0], "serialization")
                .reason.find("member_concurrency says nothing about parallelism inside a batch"),
            std::string::npos);
}

// Goal: `wharf check` reports each relay with its input (broker, URL, template, types, order),
// and member_concurrency with what it does to the proofs, in text and JSON; never a password.
TEST(DeclarativeRelayTest, CheckReportsRelaysAndMemberConcurrency) {
  CliResult r = RunCheck(Data("relay.yaml"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("input op.orders/input.orders (consumers: orders-to-redis)\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  relay orders-to-redis: redis_streams redis://127.0.0.1:6379 -> "
                       "orders:{partition} (types: OrderCreated)\n"
                       "    order per partition   ordering: partition: each partition's lane "
                       "publishes its facts in id order"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("input op.orders/input.notify (consumers: notifier; member_concurrency 8)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("ordering      established per key"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("serialization failed      none            member_concurrency 8"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("hunter2"), std::string::npos) << r.out;

  r = RunCheck(Data("relay.yaml") + " --json");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(R"("relays":[{"id":"orders-to-redis","broker":"redis_streams",)"
                       R"("url":"redis://127.0.0.1:6379","target":"orders:{partition}",)"
                       R"("types":["OrderCreated"],"order":"per partition","reason":")"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(R"("consumers":["notifier"],"member_concurrency":8,"proofs":[)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(R"({"guarantee":"ordering","outcome":"established","scope":"per key")"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(R"({"guarantee":"serialization","outcome":"failed","scope":"none")"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("hunter2"), std::string::npos) << r.out;
}

// Goal: `config=FILE` in the runtime options hands the file's relays to the runtime (to register
// at start), and refuses a file whose relay options are bad with their file:line:column, in the
// C++ option string and through the C ABI.
TEST(DeclarativeRelayTest, RuntimeConfigOptionCarriesTheRelays) {
  RuntimeOptions options;
  ASSERT_OK(ParseRuntimeOptions("config=" + Data("relay.yaml"), &options));
  EXPECT_TRUE(static_cast<bool>(options.register_at_start));
  EXPECT_EQ(options.workers, 4u);
  RuntimeOptions plain;
  ASSERT_OK(ParseRuntimeOptions("config=" + Data("seed_full_example.yaml"), &plain));
  EXPECT_FALSE(static_cast<bool>(plain.register_at_start));

  TempDir dir;
  std::string bad = dir.path() + "/bad.yaml";
  std::ofstream(bad) << WithConsumers(
      "  - id: r1\n"
      "    kind: relay\n"
      "    input: op.a/in.k\n"
      "    relay:\n"
      "      kind: redis_streams\n"
      "      in_flight: 0\n");
  Status s = ParseRuntimeOptions("config=" + bad, &options);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(s.message(),
            bad + ":23:7: relay 'r1': relay options: in_flight='0' is not a number >= 1");
  wharf_engine* engine = nullptr;
  ASSERT_EQ(wharf_open(dir.db().c_str(), nullptr, &engine), WHARF_OK) << wharf_last_error();
  wharf_runtime* runtime = nullptr;
  std::string runtime_options = "config=" + bad;
  EXPECT_EQ(wharf_runtime_new(engine, runtime_options.c_str(), &runtime), WHARF_INVALID_ARGUMENT);
  EXPECT_NE(std::string(wharf_last_error()).find("bad.yaml:23:7: relay 'r1'"), std::string::npos)
      << wharf_last_error();
  EXPECT_EQ(wharf_close(engine), WHARF_OK);
}

}  // namespace
}  // namespace wharf::declarative
