// Einsum (opset 12+), reference. A direct evaluation of the equation: one odometer over
// every label (output labels first, then the summed ones), multiplying the operands'
// elements. Handles explicit and implicit outputs, "..." (broadcast like numpy), repeated
// labels within an operand (diagonals) and size-1 broadcasting.
#include <map>

#include "kernels/cpu/ref/misc_util.h"
#include "kernels/cpu/ref/ref_util.h"

namespace gearbox::ref {
namespace {

constexpr int kEllipsisBase = 256;  // label ids for the dims "..." stands for

struct Term {
  std::vector<int> letters;  // in order; -1 marks the ellipsis
  bool has_ellipsis = false;
};

Result<Term> parse_term(const KernelContext& ctx, const std::string& s) {
  Term t;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '.') {
      if (s.compare(i, 3, "...") != 0 || t.has_ellipsis)
        return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "bad ellipsis in einsum term '", s, "'");
      t.letters.push_back(-1);
      t.has_ellipsis = true;
      i += 2;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      t.letters.push_back(c);
    } else {
      return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "bad character '", c, "' in einsum term '", s, "'");
    }
  }
  return t;
}

// Expands a term into one label per dim of a tensor of rank `rank`.
Result<std::vector<int>> expand(const KernelContext& ctx, const Term& t, int64_t rank, int64_t ell_rank) {
  const int64_t named = static_cast<int64_t>(t.letters.size()) - (t.has_ellipsis ? 1 : 0);
  const int64_t er = rank - named;
  if (er < 0 || (!t.has_ellipsis && er != 0) || er > ell_rank)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "einsum term with ", named, " labels does not fit a rank-", rank,
                     " operand");
  std::vector<int> out;
  for (int l : t.letters) {
    if (l != -1) {
      out.push_back(l);
      continue;
    }
    for (int64_t k = ell_rank - er; k < ell_rank; ++k) out.push_back(kEllipsisBase + static_cast<int>(k));
  }
  return out;
}

Status einsum(KernelContext& ctx) {
  std::string eq;
  for (char c : ctx.attr_string("equation", ""))
    if (c != ' ') eq += c;
  if (eq.empty()) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "attribute equation is required");
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != ctx.num_inputs())
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "equation '", eq, "' has ", terms.size(),
                     " operands but the node has ", ctx.num_inputs(), " inputs");
  std::vector<Term> parsed;
  int64_t ell_rank = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
    GBX_ASSIGN_OR_RETURN(Term t, parse_term(ctx, terms[i]));
    const int64_t named = static_cast<int64_t>(t.letters.size()) - (t.has_ellipsis ? 1 : 0);
    if (t.has_ellipsis) ell_rank = std::max(ell_rank, static_cast<int64_t>(ctx.input(i).rank()) - named);
    parsed.push_back(std::move(t));
  }
  // Labels per operand dim, and each label's size.
  std::vector<std::vector<int>> labels;
  std::map<int, int64_t> size;
  std::map<int, int> count;
  for (size_t i = 0; i < parsed.size(); ++i) {
    const Tensor& x = ctx.input(i);
    GBX_ASSIGN_OR_RETURN(std::vector<int> l, expand(ctx, parsed[i], static_cast<int64_t>(x.rank()), ell_rank));
    for (size_t d = 0; d < l.size(); ++d) {
      auto it = size.find(l[d]);
      if (it == size.end() || it->second == 1) {
        size[l[d]] = x.dim(d);
      } else if (x.dim(d) != 1 && x.dim(d) != it->second) {
        return ctx.error(ErrorCode::SHAPE_MISMATCH, "einsum label sizes disagree: ", it->second, " vs ", x.dim(d),
                         " in operand ", i, " ", describe(x));
      }
      ++count[l[d]];
    }
    labels.push_back(std::move(l));
  }
  std::vector<int> out_labels;
  if (arrow != std::string::npos) {
    GBX_ASSIGN_OR_RETURN(Term t, parse_term(ctx, eq.substr(arrow + 2)));
    for (int l : t.letters) {
      if (l == -1) {
        for (int64_t k = 0; k < ell_rank; ++k) out_labels.push_back(kEllipsisBase + static_cast<int>(k));
      } else {
        if (!size.count(l))
          return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "output label '", char(l), "' is not an input label");
        out_labels.push_back(l);
      }
    }
  } else {
    for (int64_t k = 0; k < ell_rank; ++k) out_labels.push_back(kEllipsisBase + static_cast<int>(k));
    for (auto& [l, n] : count)
      if (l < kEllipsisBase && n == 1) out_labels.push_back(l);
  }
  for (int l : out_labels)
    if (!size.count(l)) size[l] = 1;  // an ellipsis dim no operand has
  std::vector<int> all = out_labels;
  for (auto& [l, n] : size)
    if (std::find(all.begin(), all.end(), l) == all.end()) all.push_back(l);

  // Per operand: its stride for each label of `all` (diagonals add; broadcast dims are 0).
  std::vector<std::vector<int64_t>> strides(parsed.size(), std::vector<int64_t>(all.size(), 0));
  std::vector<std::vector<double>> data;
  for (size_t i = 0; i < parsed.size(); ++i) {
    const Tensor& x = ctx.input(i);
    std::vector<int64_t> st = strides_of(x.dims());
    for (size_t d = 0; d < labels[i].size(); ++d) {
      if (x.dim(d) == 1 && size[labels[i][d]] != 1) continue;
      size_t k = static_cast<size_t>(std::find(all.begin(), all.end(), labels[i][d]) - all.begin());
      strides[i][k] += st[d];
    }
    data.push_back(read_doubles(x));
  }
  Dims out_dims, all_dims;
  for (int l : out_labels) out_dims.push_back(size[l]);
  for (int l : all) all_dims.push_back(size[l]);
  const DType dt = ctx.input(0).dtype();
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(dt, out_dims));
  std::vector<double> out(static_cast<size_t>(y.numel()), 0.0);
  const int64_t total = numel(all_dims);
  if (total > 0) {
    int64_t inner = 1;  // iterations per output element (the summed labels vary fastest)
    for (size_t k = out_labels.size(); k < all.size(); ++k) inner *= all_dims[k];
    std::vector<int64_t> idx(all.size(), 0), off(parsed.size(), 0);
    for (int64_t it = 0; it < total; ++it) {
      double p = 1;
      for (size_t i = 0; i < parsed.size(); ++i) p *= data[i][static_cast<size_t>(off[i])];
      out[static_cast<size_t>(it / inner)] += p;
      for (size_t k = all.size(); k-- > 0;) {
        if (++idx[k] < all_dims[k]) {
          for (size_t i = 0; i < parsed.size(); ++i) off[i] += strides[i][k];
          break;
        }
        for (size_t i = 0; i < parsed.size(); ++i) off[i] -= strides[i][k] * (all_dims[k] - 1);
        idx[k] = 0;
      }
    }
  }
  store_doubles(y, out);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"",
                     "Einsum",
                     12,
                     18,
                     kEngineRef,
                     {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U32, DType::U64},
                     einsum});

}  // namespace
}  // namespace gearbox::ref
