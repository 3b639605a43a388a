// Runs control-flow and dynamic-shape models exported from torch (scripts/export_dynamic_models.py)
// through ONE Session per model: every case (a different input shape or branch) must match
// torch's output, and the plan cache must prepare once per distinct shape signature and reuse
// the plan when the cases run again.
//
// Usage: gearbox_session_parity MODEL_DIR...   (each with model.onnx and case_*/ folders)
// Exit status 0 only when every case of every model matches.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/npy.h"
#include "runtime/plan_cache.h"
#include "runtime/session.h"

namespace fs = std::filesystem;
using namespace gearbox;

namespace {

// Same bound as the model parity tests: |got - want| <= atol + rtol * |want|.
constexpr double kAtol = 1e-4, kRtol = 1e-3;

struct Case {
  std::string name;
  std::map<std::string, Tensor> inputs;
  std::map<std::string, Tensor> expected;
  std::string signature;  // input shapes, to count distinct ones
};

bool load_case(const fs::path& dir, Case* c) {
  c->name = dir.filename().string();
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".npy") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    auto t = read_npy(f.string());
    if (!t.ok()) {
      std::printf("FAIL %s: %s\n", f.c_str(), t.status().to_string().c_str());
      return false;
    }
    std::string stem = f.stem().string();
    if (stem.rfind("expected_", 0) == 0) {
      c->expected[stem.substr(9)] = t.value();
    } else {
      c->signature += stem + describe(t.value()) + ";";
      c->inputs[stem] = t.value();
    }
  }
  return !c->inputs.empty() && !c->expected.empty();
}

bool check_case(const Session& s, const Case& c, const std::string& model) {
  auto out = s.run(c.inputs);
  if (!out.ok()) {
    std::printf("FAIL %s/%s: %s\n", model.c_str(), c.name.c_str(), out.status().to_string().c_str());
    return false;
  }
  bool ok = true;
  for (size_t i = 0; i < s.outputs().size(); ++i) {
    const std::string& name = s.outputs()[i].name;
    auto it = c.expected.find(name);
    if (it == c.expected.end()) {
      std::printf("FAIL %s/%s: no expected_%s.npy\n", model.c_str(), c.name.c_str(), name.c_str());
      return false;
    }
    const Tensor& got = out.value()[i];
    const Tensor& want = it->second;
    if (got.dims() != want.dims() || got.dtype() != want.dtype()) {
      std::printf("FAIL %s/%s: output %s is %s, torch gives %s\n", model.c_str(), c.name.c_str(), name.c_str(),
                  describe(got).c_str(), describe(want).c_str());
      ok = false;
      continue;
    }
    double worst = 0;
    int64_t bad = 0;
    for (int64_t k = 0; k < want.numel(); ++k) {
      double g = got.at_double(k), w = want.at_double(k), err = std::abs(g - w);
      worst = std::max(worst, err);
      if (!(err <= kAtol + kRtol * std::abs(w))) ++bad;
    }
    std::printf("%s %s/%s: %s %s max abs err %.3g\n", bad ? "FAIL" : "ok  ", model.c_str(), c.name.c_str(),
                name.c_str(), describe(got).c_str(), worst);
    if (bad) ok = false;
  }
  return ok;
}

bool run_model(const fs::path& dir) {
  const std::string model = dir.filename().string();
  SessionOptions options;
  options.plan_cache_size = 8;
  auto session = Session::load((dir / "model.onnx").string(), options);
  if (!session.ok()) {
    std::printf("FAIL %s: %s\n", model.c_str(), session.status().to_string().c_str());
    return false;
  }
  const Session& s = *session.value();
  std::vector<fs::path> case_dirs;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("case_", 0) == 0) case_dirs.push_back(e.path());
  std::sort(case_dirs.begin(), case_dirs.end());
  std::vector<Case> cases(case_dirs.size());
  std::set<std::string> signatures;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (!load_case(case_dirs[i], &cases[i])) {
      std::printf("FAIL %s: %s lacks inputs or expected outputs\n", model.c_str(), case_dirs[i].c_str());
      return false;
    }
    signatures.insert(cases[i].signature);
  }
  if (cases.empty()) {
    std::printf("FAIL %s: no case_* folders (export failed?)\n", model.c_str());
    return false;
  }
  bool ok = true;
  for (int pass = 0; pass < 2; ++pass)  // the second pass must hit the plan cache every time
    for (const Case& c : cases) ok = check_case(s, c, model) && ok;
  PlanCacheStats st = s.plan_cache_stats();
  const bool cache_ok = st.prepared == signatures.size() && st.reused == 2 * cases.size() - signatures.size();
  std::printf("%s %s: plan cache prepared %llu, reused %llu for %zu runs over %zu shape signatures\n",
              cache_ok ? "ok  " : "FAIL", model.c_str(), static_cast<unsigned long long>(st.prepared),
              static_cast<unsigned long long>(st.reused), 2 * cases.size(), signatures.size());
  return ok && cache_ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR...\n", argv[0]);
    return 2;
  }
  bool ok = true;
  for (int i = 1; i < argc; ++i) ok = run_model(argv[i]) && ok;
  std::printf(ok ? "PASS\n" : "FAILED\n");
  return ok ? 0 : 1;
}
