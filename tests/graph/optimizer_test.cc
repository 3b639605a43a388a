// The optimizer's switches: disabled passes, fusion-switch files, GEARBOX_DISABLE_PASSES,
// unknown names, and the report.
#include "graph/optimizer.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "graph/pass_test_util.h"

namespace gearbox::testing {
namespace {

Model identity_relu() {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {2});
  b.output(b.op("Relu", {b.op("Identity", {x})}));
  return b.take();
}

std::string write_file(const std::string& name, const std::string& text) {
  std::filesystem::create_directories(GEARBOX_TEST_TMP);
  std::string path = std::string(GEARBOX_TEST_TMP) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

OptimizerOptions no_env() {
  OptimizerOptions o;
  o.use_env = false;
  return o;
}

TEST(Optimizer, DefaultPipelineRunsEveryPassAndReports) {
  Model m = identity_relu();
  auto rep = optimize(m, no_env());
  ASSERT_TRUE(rep.ok()) << rep.status().to_string();
  EXPECT_EQ(rep->passes.size(), optimizer_passes().size());
  for (const auto& p : rep->passes) EXPECT_TRUE(p.ran) << p.name;
  EXPECT_EQ(rep->nodes_before, 2u);
  EXPECT_EQ(rep->nodes_after, 1u);
  EXPECT_EQ(rep->matches("remove_noop"), 1);
  EXPECT_NE(rep->to_json().find("\"remove_noop\""), std::string::npos);
}

TEST(Optimizer, DisabledPassDoesNotRun) {
  Model m = identity_relu();
  OptimizerOptions o = no_env();
  o.disabled_passes = {"remove_noop"};
  auto rep = optimize(m, o);
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(m.graph->nodes.size(), 2u);
  EXPECT_EQ(rep->matches("remove_noop"), 0);
}

TEST(Optimizer, UnknownPassNameListsValidNames) {
  Model m = identity_relu();
  OptimizerOptions o = no_env();
  o.disabled_passes = {"remove_nop"};
  auto rep = optimize(m, o);
  ASSERT_FALSE(rep.ok());
  EXPECT_EQ(rep.status().code(), ErrorCode::PASS_UNKNOWN);
  EXPECT_NE(rep.status().message().find("remove_noop"), std::string::npos);
  EXPECT_NE(rep.status().message().find("constant_folding"), std::string::npos);
  EXPECT_EQ(m.graph->nodes.size(), 2u);  // untouched
}

TEST(Optimizer, FusionSwitchFile) {
  auto sw = read_fusion_switch_file(write_file("switch_ok.json", R"({"remove_noop": "off", "cse": "on"})"));
  ASSERT_TRUE(sw.ok()) << sw.status().to_string();
  EXPECT_FALSE(sw->at("remove_noop"));
  EXPECT_TRUE(sw->at("cse"));
  Model m = identity_relu();
  OptimizerOptions o = no_env();
  o.switches = *sw;
  ASSERT_TRUE(optimize(m, o).ok());
  EXPECT_EQ(m.graph->nodes.size(), 2u);

  auto bad_value = read_fusion_switch_file(write_file("switch_bad.json", R"({"cse": true})"));
  EXPECT_EQ(bad_value.status().code(), ErrorCode::FUSION_SWITCH_INVALID);
  auto not_json = read_fusion_switch_file(write_file("switch_bad2.json", "cse=off"));
  EXPECT_EQ(not_json.status().code(), ErrorCode::FUSION_SWITCH_INVALID);
  auto missing = read_fusion_switch_file(std::string(GEARBOX_TEST_TMP) + "/no_such_switch.json");
  EXPECT_EQ(missing.status().code(), ErrorCode::FUSION_SWITCH_INVALID);
  auto unknown = read_fusion_switch_file(write_file("switch_unknown.json", R"({"gelu": "off"})"));
  EXPECT_EQ(unknown.status().code(), ErrorCode::PASS_UNKNOWN);
}

// GEARBOX_DISABLE_PASSES is read by resolve_session_options (runtime/session.h), the one
// place the session's environment is read, never by optimize() itself.
TEST(Optimizer, EnvironmentSwitches) {
  const char* old = getenv("GEARBOX_DISABLE_PASSES");
  std::string saved = old ? old : "";
  setenv("GEARBOX_DISABLE_PASSES", "all", 1);
  SessionOptions so;  // optimizer.use_env = true
  auto s1 = Session::create(identity_relu(), so);
  ASSERT_TRUE(s1.ok()) << s1.status().to_string();
  EXPECT_EQ((*s1)->model().graph->nodes.size(), 2u);
  for (const auto& p : (*s1)->optimizer_report().passes) EXPECT_FALSE(p.ran);
  // optimize() alone ignores the variable.
  Model direct = identity_relu();
  ASSERT_TRUE(optimize(direct, OptimizerOptions{}).ok());
  EXPECT_EQ(direct.graph->nodes.size(), 1u);

  setenv("GEARBOX_DISABLE_PASSES", "cse, remove_noop", 1);
  auto resolved = resolve_session_options(so);
  ASSERT_TRUE(resolved.ok());
  EXPECT_FALSE(resolved->optimizer.use_env);
  EXPECT_EQ(resolved->optimizer.disabled_passes, (std::vector<std::string>{"cse", "remove_noop"}));
  auto s2 = Session::create(identity_relu(), so);
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ((*s2)->model().graph->nodes.size(), 2u);

  setenv("GEARBOX_DISABLE_PASSES", "bogus", 1);
  EXPECT_EQ(Session::create(identity_relu(), so).status().code(), ErrorCode::PASS_UNKNOWN);
  so.optimizer.use_env = false;  // ignores it
  EXPECT_TRUE(Session::create(identity_relu(), so).ok());
  if (old)
    setenv("GEARBOX_DISABLE_PASSES", saved.c_str(), 1);
  else
    unsetenv("GEARBOX_DISABLE_PASSES");
}

TEST(Optimizer, SessionRunsThePipelineAndHonoursSwitches) {
  SessionOptions so;
  so.optimizer.use_env = false;
  auto s = Session::create(identity_relu(), so);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->model().graph->nodes.size(), 1u);
  so.optimizer.disabled_passes = {"nope"};
  auto bad = Session::create(identity_relu(), so);
  EXPECT_EQ(bad.status().code(), ErrorCode::PASS_UNKNOWN);
}

}  // namespace
}  // namespace gearbox::testing
