// The memory planner: lifetimes, best-fit offsets that never overlap live tensors, in-place
// reuse, and the naive / planned / lower-bound figures on hand-computed graphs.
#include "graph/memory_plan.h"

#include <gtest/gtest.h>

#include <map>

#include "graph/pass_test_util.h"

namespace gearbox::testing {
namespace {

// Expects no two values that are live at the same node to share a byte (unless one reuses the
// other's buffer: in place or a view).
void expect_no_live_overlap(const MemoryPlan& p) {
  for (size_t i = 0; i < p.placements.size(); ++i)
    for (size_t j = i + 1; j < p.placements.size(); ++j) {
      const auto &u = p.placements[i], &w = p.placements[j];
      if (u.in_place_of == w.value || w.in_place_of == u.value) continue;  // one buffer, by design
      const bool live_together = u.first <= w.last && w.first <= u.last;
      const bool bytes_overlap = u.offset < w.offset + w.bytes && w.offset < u.offset + u.bytes;
      EXPECT_FALSE(live_together && bytes_overlap) << u.value->name << " / " << w.value->name;
    }
}

TEST(MemoryPlan, ChainReusesMemoryAndMatchesTheLowerBound) {
  // x -> Exp a -> Softmax c -> Softmax d -> Softmax e, 256 floats each. Softmax is not
  // element-wise in the planner, so no in-place: d may take a's slot and e c's.
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {256});
  Value* a = b.op("Exp", {x});        // 1024 B
  Value* c = b.op("Softmax", {a});    // 1024 B, a dies here
  Value* d = b.op("Softmax", {c});    // 1024 B, c dies here
  Value* e = b.op("Softmax", {d});    // 1024 B
  for (Value* v : {a, c, d, e}) typed(v, {256});
  b.output(e);
  Model m = b.take();
  MemoryPlan p = plan_memory(*m.graph);
  EXPECT_EQ(p.naive_bytes, 4096u);
  EXPECT_EQ(p.lower_bound_bytes, 2048u);  // two tensors live at each node
  EXPECT_EQ(p.planned_bytes, 2048u);
  EXPECT_EQ(p.in_place_reuses, 0);
}

TEST(MemoryPlan, OverlappingLifetimesNeverShareBytes) {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {10});
  std::vector<Value*> vals;
  Value* prev = x;
  // Sizes 40..400 B (aligned to 64..448), each kept alive until a final Sum reads them all.
  for (int i = 1; i <= 10; ++i) {
    Value* v = b.op("Softmax", {prev});
    typed(v, {10 * i});
    vals.push_back(v);
    prev = v;
  }
  Value* s = b.op("Sum", vals);
  typed(s, {100});
  b.output(s);
  Model m = b.take();
  MemoryPlan p = plan_memory(*m.graph);
  for (const auto& pl : p.placements) EXPECT_EQ(pl.offset % 64, 0u);
  expect_no_live_overlap(p);
  EXPECT_GE(p.planned_bytes, p.lower_bound_bytes);
  EXPECT_EQ(p.planned_bytes, p.lower_bound_bytes);  // all live at the Sum: no room to do better or worse
}

TEST(MemoryPlan, DisjointLifetimesShareOffsets) {
  // a (1024 B) -> b (256 B) -> c (1024 B) -> d (256 B, output); each dies at the next node.
  // The sizes are declared by hand (the planner reads only value types). a [0,1] and c [2,3]
  // never live together, nor do b [1,2] and d [3,end]: the best plan puts c on a and d on b,
  // 1280 B, which is also the most bytes live at one node.
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {256});
  Value* va = b.op("Softmax", {x});
  Value* vb = b.op("Softmax", {va});
  Value* vc = b.op("Softmax", {vb});
  Value* vd = b.op("Softmax", {vc});
  typed(va, {256});
  typed(vb, {64});
  typed(vc, {256});
  typed(vd, {64});
  b.output(vd);
  Model m = b.take();
  MemoryPlan p = plan_memory(*m.graph);
  ASSERT_EQ(p.placements.size(), 4u);
  std::map<const Value*, BufferPlacement> at;
  for (const auto& pl : p.placements) at[pl.value] = pl;
  EXPECT_EQ(at[va].offset, at[vc].offset);
  EXPECT_EQ(at[vb].offset, at[vd].offset);
  EXPECT_NE(at[va].offset, at[vb].offset);
  expect_no_live_overlap(p);
  EXPECT_EQ(p.naive_bytes, 2560u);
  EXPECT_EQ(p.lower_bound_bytes, 1280u);
  EXPECT_EQ(p.planned_bytes, 1280u);
}

TEST(MemoryPlan, ElementwiseRunsInPlace) {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {64});
  Value* a = b.op("Exp", {x});
  Value* r = b.op("Relu", {a});  // a dies here: r may take a's memory
  Value* s = b.op("Sigmoid", {r});
  for (Value* v : {a, r, s}) typed(v, {64});
  b.output(s);
  Model m = b.take();
  MemoryPlan p = plan_memory(*m.graph);
  EXPECT_EQ(p.in_place_reuses, 2);
  EXPECT_EQ(p.planned_bytes, 256u);
  EXPECT_EQ(p.lower_bound_bytes, 512u);
  MemoryPlanOptions no_inplace;
  no_inplace.in_place = false;
  EXPECT_EQ(plan_memory(*m.graph, no_inplace).planned_bytes, 512u);
}

// As executed (the arena): element-wise ops get buffers of their own (their kernels do not
// write over inputs), a view shares its input's buffer, and a channels-last fused conv's
// output takes its residual's buffer (OpDescriptor::output_views_input0 and
// kernel_overwrites_input say which).
TEST(MemoryPlan, AsExecutedFollowsViewsAndKernelsThatOverwrite) {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {1, 4, 4, 8});
  Value* z = b.op("Relu", {x});
  Value* y = b.op("Relu", {z});                                   // element-wise: not over z here
  Value* v = b.op("Reshape", {y, b.constant("shape", ints({1, 128}))});  // a view of y
  Value* r = b.op("Relu", {x});
  AttributeMap attrs;
  attrs["pads"] = attr_ints({1, 1, 1, 1});
  Node* conv = b.node("NhwcConv", {x, b.constant("w", random_tensor({8, 8, 3, 3}, 1)), b.constant("bias", random_tensor({8}, 2)), r},
                      1, attrs, "com.gearbox");
  for (Value* t : {z, y, r, conv->outputs[0]}) typed(t, {1, 4, 4, 8});
  typed(v, {1, 128});
  b.output(b.op("Add", {conv->outputs[0], b.op("Reshape", {v, b.constant("back", ints({1, 4, 4, 8}))})}));
  Model m = b.take();
  MemoryPlanOptions o;
  o.as_executed = true;
  MemoryPlan p = plan_memory(*m.graph, o);
  std::map<const Value*, const Value*> in_place_of;
  for (const BufferPlacement& bp : p.placements) in_place_of[bp.value] = bp.in_place_of;
  ASSERT_TRUE(in_place_of.count(y));
  EXPECT_EQ(in_place_of[y], nullptr) << "Relu's kernel writes a new buffer";
  EXPECT_EQ(in_place_of[v], y) << "Reshape returns its input's buffer";
  EXPECT_EQ(in_place_of[conv->outputs[0]], r) << "the conv adds Z where it lies";
  expect_no_live_overlap(p);
}

TEST(MemoryPlan, SymbolicDimsNeedBindings) {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {Dim::symbolic("n")});
  Value* a = b.op("Exp", {x});
  a->type.dtype = DType::F32;
  a->type.shape = Shape({Dim::symbolic("n")});
  b.output(a);
  Model m = b.take();
  EXPECT_EQ(plan_memory(*m.graph).unsized_values, 1);
  MemoryPlanOptions o;
  o.dim_values["n"] = 100;
  MemoryPlan p = plan_memory(*m.graph, o);
  EXPECT_EQ(p.unsized_values, 0);
  EXPECT_EQ(p.planned_bytes, 448u);  // 400 B aligned to 64
}

}  // namespace
}  // namespace gearbox::testing
