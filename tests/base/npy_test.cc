// .npy round trips for every numeric dtype, and the malformed-file errors. Expected bytes
// of the header come from numpy's own format (np.save), not from our writer.
#include "base/npy.h"

#include <gtest/gtest.h>

namespace gearbox {
namespace {

TEST(Npy, ReadsNumpyWrittenFile) {
  // Bytes of np.save(f, np.array([[1.5, -2.0, 3.25]], dtype=np.float32)) (numpy 1.24).
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size());
  bytes += '\0';
  bytes += header;
  float vals[3] = {1.5f, -2.0f, 3.25f};
  bytes.append(reinterpret_cast<const char*>(vals), sizeof(vals));
  auto t = parse_npy(bytes);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->dtype(), DType::F32);
  EXPECT_EQ(t->dims(), (Dims{1, 3}));
  EXPECT_FLOAT_EQ(t->data<float>()[2], 3.25f);
  // Our writer produces the same bytes numpy does.
  EXPECT_EQ(serialize_npy(*t), bytes);
}

TEST(Npy, RoundTripsEveryNumericDtype) {
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::I8, DType::U8, DType::I16, DType::U16, DType::I32,
                   DType::U32, DType::I64, DType::U64, DType::Bool}) {
    Tensor t(dt, {2, 3});
    visit_numeric(dt, [&](auto tag) {
      using T = typename decltype(tag)::type;
      for (int64_t i = 0; i < 6; ++i) t.data<T>()[i] = static_cast<T>(static_cast<compute_t<T>>(i % 2 ? i : 0));
    });
    auto back = parse_npy(serialize_npy(t));
    ASSERT_TRUE(back.ok()) << dtype_name(dt) << ": " << back.status().to_string();
    EXPECT_EQ(back->dtype(), dt);
    EXPECT_EQ(back->dims(), t.dims());
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(back->at_double(i), t.at_double(i)) << dtype_name(dt);
  }
}

TEST(Npy, ScalarAndEmptyShapes) {
  Tensor s = Tensor::scalar<int64_t>(42);
  auto back = parse_npy(serialize_npy(s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->rank(), 0u);
  EXPECT_EQ(back->data<int64_t>()[0], 42);
  Tensor e(DType::F32, {0, 4});
  auto eb = parse_npy(serialize_npy(e));
  ASSERT_TRUE(eb.ok());
  EXPECT_EQ(eb->dims(), (Dims{0, 4}));
}

TEST(Npy, RejectsMalformedFiles) {
  EXPECT_EQ(parse_npy("not a numpy file").status().code(), ErrorCode::NPY_INVALID);
  std::string good = serialize_npy(Tensor(DType::F32, {4}));
  EXPECT_EQ(parse_npy(good.substr(0, good.size() - 3)).status().code(), ErrorCode::NPY_INVALID);  // short data
  std::string bad_shape = good;
  bad_shape.replace(bad_shape.find("(4,)"), 4, "(x,)");
  EXPECT_EQ(parse_npy(bad_shape).status().code(), ErrorCode::NPY_INVALID);
  std::string huge = good;
  huge[8] = '\xff';  // header length past the end of the file
  huge[9] = '\xff';
  EXPECT_EQ(parse_npy(huge).status().code(), ErrorCode::NPY_INVALID);
  std::string complex = good;
  complex.replace(complex.find("<f4"), 3, "<c8");
  EXPECT_EQ(parse_npy(complex).status().code(), ErrorCode::NPY_UNSUPPORTED_DTYPE);
  // Fortran order matters from two dims on (a 1-d array is stored the same either way).
  std::string fortran = serialize_npy(Tensor(DType::F32, {2, 2}));
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_EQ(parse_npy(fortran).status().code(), ErrorCode::NPY_UNSUPPORTED_DTYPE);
  std::string fortran_1d = good;
  fortran_1d.replace(fortran_1d.find("False"), 5, "True ");
  EXPECT_TRUE(parse_npy(fortran_1d).ok());
}

// Bytes after the data are refused unless the reader is told to ignore them (as numpy does).
TEST(Npy, TrailingBytesOnlyWhenAllowed) {
  std::string longer = serialize_npy(Tensor::from_vector<float>({1.f, 2.f})) + std::string(4, '\0');
  auto strict = parse_npy(longer);
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().code(), ErrorCode::NPY_INVALID);
  EXPECT_NE(strict.status().message().find("4 bytes follow"), std::string::npos) << strict.status().message();
  auto lenient = parse_npy(longer, "<memory>", NpyReadOptions{.allow_trailing_bytes = true});
  ASSERT_TRUE(lenient.ok()) << lenient.status().to_string();
  EXPECT_EQ(lenient->dims(), (Dims{2}));
  EXPECT_EQ(lenient->data<float>()[1], 2.f);
}

// '>i4' data is swapped on load: the value 0x01020304 stored big-endian reads back as itself.
TEST(Npy, BigEndianDataIsSwapped) {
  std::string be = serialize_npy(Tensor::from_vector<int32_t>({0}));
  be.replace(be.find("<i4"), 3, ">i4");
  const char bytes[4] = {1, 2, 3, 4};
  be.replace(be.size() - 4, 4, std::string(bytes, 4));
  auto t = parse_npy(be);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->data<int32_t>()[0], 0x01020304);
}

TEST(Npy, MissingAndEmptyFiles) {
  EXPECT_EQ(read_npy("/nonexistent/x.npy").status().code(), ErrorCode::FILE_NOT_FOUND);
}

// Every prefix of a valid file must be refused cleanly (a tiny exhaustive fuzz).
TEST(Npy, EveryTruncationIsAnError) {
  std::string good = serialize_npy(Tensor(DType::I32, {3, 2}));
  for (size_t n = 0; n < good.size(); ++n) EXPECT_FALSE(parse_npy(good.substr(0, n)).ok()) << n;
}

}  // namespace
}  // namespace gearbox
