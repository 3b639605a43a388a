// TfIdfVectorizer (opset 9), reference: counts the pool's n-grams (lengths min..max, with
// up to max_skip_count tokens skipped between items; unigrams counted once) in each row of
// an int or string input, then reports TF counts, IDF weights or TF*IDF per
// ngram_indexes slot. Tokens are compared as strings (ints via their decimal form).
#include <map>

#include "kernels/cpu/ref/ref_util.h"

namespace gearbox::ref {
namespace {

Status tfidf(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  if (x.rank() != 1 && x.rank() != 2)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "input must be [C] or [N, C], got ", describe(x));
  if (x.dtype() != DType::String && x.dtype() != DType::I32 && x.dtype() != DType::I64)
    return ctx.unsupported_dtype(x.dtype());
  const int64_t min_n = ctx.attr_int("min_gram_length", 1), max_n = ctx.attr_int("max_gram_length", 1);
  const int64_t max_skip = ctx.attr_int("max_skip_count", 0);
  const std::string mode = ctx.attr_string("mode", "TF");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF")
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "mode '", mode, "' is not TF, IDF or TFIDF");
  const std::vector<int64_t> counts = ctx.attr_ints("ngram_counts"), indexes = ctx.attr_ints("ngram_indexes");
  std::vector<std::string> pool = ctx.attr_strings("pool_strings");
  if (pool.empty())
    for (int64_t v : ctx.attr_ints("pool_int64s")) pool.push_back(std::to_string(v));
  const std::vector<float> weights = ctx.attr_floats("weights");
  if (min_n < 1 || max_n < min_n || max_skip < 0 || counts.empty())
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "bad n-gram attributes: min ", min_n, ", max ", max_n, ", skip ",
                     max_skip, ", ", counts.size(), " ngram_counts");
  // Pool n-grams (each a token list) -> output slot.
  std::map<std::vector<std::string>, int64_t> slot;
  int64_t out_len = 0, k = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t n = static_cast<int64_t>(i) + 1;
    const int64_t begin = counts[i], end = i + 1 < counts.size() ? counts[i + 1] : static_cast<int64_t>(pool.size());
    if (begin < 0 || end > static_cast<int64_t>(pool.size()) || begin > end || (end - begin) % n != 0)
      return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "ngram_counts ", i, " does not partition a pool of ", pool.size());
    for (int64_t p = begin; p < end; p += n, ++k) {
      if (k >= static_cast<int64_t>(indexes.size()))
        return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "ngram_indexes has ", indexes.size(),
                         " entries, too few for the pool");
      const int64_t idx = indexes[static_cast<size_t>(k)];
      if (idx < 0 || idx >= (int64_t(1) << 24))
        return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "ngram_indexes value ", idx, " is out of range");
      std::vector<std::string> g(pool.begin() + p, pool.begin() + p + n);
      slot[g] = indexes[static_cast<size_t>(k)];
      out_len = std::max(out_len, indexes[static_cast<size_t>(k)] + 1);
    }
  }
  std::vector<std::string> tokens;
  if (x.dtype() == DType::String) {
    tokens = x.strings();
  } else {
    for (int64_t i = 0; i < x.numel(); ++i) tokens.push_back(std::to_string(static_cast<int64_t>(x.at_double(i))));
  }
  const int64_t rows = x.rank() == 2 ? x.dim(0) : 1, len = x.rank() == 2 ? x.dim(1) : x.dim(0);
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(DType::F32, x.rank() == 2 ? Dims{rows, out_len} : Dims{out_len}));
  float* out = y.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> cnt(static_cast<size_t>(out_len), 0.0);
    const std::string* row = tokens.data() + r * len;
    for (int64_t n = min_n; n <= max_n; ++n) {
      const int64_t skips = n == 1 ? 0 : max_skip;
      for (int64_t s = 0; s <= skips; ++s) {
        for (int64_t start = 0; start + (n - 1) * (s + 1) < len; ++start) {
          std::vector<std::string> g;
          for (int64_t j = 0; j < n; ++j) g.push_back(row[start + j * (s + 1)]);
          auto it = slot.find(g);
          if (it != slot.end()) cnt[static_cast<size_t>(it->second)] += 1;
        }
      }
    }
    for (int64_t i = 0; i < out_len; ++i) {
      double w = static_cast<size_t>(i) < weights.size() ? weights[static_cast<size_t>(i)] : 1.0;
      double c = cnt[static_cast<size_t>(i)];
      out[r * out_len + i] = static_cast<float>(mode == "TF" ? c : mode == "IDF" ? (c > 0 ? w : 0) : c * w);
    }
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "TfIdfVectorizer", 9, 18, kEngineRef, {DType::String, DType::I32, DType::I64}, tfidf});

}  // namespace
}  // namespace gearbox::ref
