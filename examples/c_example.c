/* c_example: load a model with the gearbox C API, describe its inputs and outputs, fill
 * every float input with a fixed pattern (symbolic dims = 2), run it synchronously and
 * asynchronously on two streams, and print the outputs.
 *
 *   c_example MODEL.onnx
 *
 * Exits 1 on any error (printing gbx_last_error_message()) or when the runs disagree. */
#include <gearbox/gearbox.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                           \
  do {                                                                        \
    if ((call) != GBX_OK) {                                                   \
      fprintf(stderr, "%s failed: %s\n", #call, gbx_last_error_message());    \
      return 1;                                                               \
    }                                                                         \
  } while (0)

enum { kMaxIo = 16, kMaxRank = 8 };

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODEL.onnx\n", argv[0]);
    return 2;
  }
  printf("gearbox %s (C API %d)\n", gbx_version(), gbx_api_version());
  int32_t n_cpu = 0;
  CHECK(gbx_device_count(GBX_DEVICE_CPU, &n_cpu));
  CHECK(gbx_device_set(GBX_DEVICE_CPU, 0));
  printf("cpu devices: %d\n", n_cpu);

  gbx_context ctx = NULL;
  gbx_model model = NULL;
  CHECK(gbx_context_create(&ctx));
  CHECK(gbx_model_load_file(ctx, argv[1], &model));

  size_t n_in = 0, n_out = 0;
  CHECK(gbx_model_input_count(model, &n_in));
  CHECK(gbx_model_output_count(model, &n_out));
  if (n_in > kMaxIo || n_out > kMaxIo) return 1;

  const char* names[kMaxIo];
  gbx_tensor inputs[kMaxIo];
  for (size_t i = 0; i < n_in; ++i) {
    gbx_io_desc d;
    CHECK(gbx_model_input(model, i, &d));
    if (d.dtype != GBX_DTYPE_FLOAT32 || d.rank < 0 || d.rank > kMaxRank) {
      fprintf(stderr, "input %s: this example fills float32 inputs of known rank only\n", d.name);
      return 1;
    }
    int64_t dims[kMaxRank];
    printf("input %s: float32 [", d.name);
    for (int32_t k = 0; k < d.rank; ++k) {
      dims[k] = d.dims[k] >= 0 ? d.dims[k] : 2; /* symbolic dims: 2 */
      printf("%s%s", k ? "," : "", d.dims[k] >= 0 ? "" : d.dim_names[k]);
      if (d.dims[k] >= 0) printf("%lld", (long long)d.dims[k]);
    }
    printf("]\n");
    names[i] = d.name;
    CHECK(gbx_tensor_create(GBX_DTYPE_FLOAT32, dims, (size_t)d.rank, &inputs[i]));
    float* data = NULL;
    size_t bytes = 0;
    CHECK(gbx_tensor_data(inputs[i], (void**)&data, &bytes));
    for (size_t e = 0; e < bytes / sizeof(float); ++e) data[e] = (float)((int)((e + 3 * i) % 7) - 3) * 0.5f;
  }

  /* Synchronous. */
  gbx_tensor outputs[kMaxIo];
  CHECK(gbx_execute(model, names, inputs, n_in, outputs, n_out));

  /* Asynchronous: the same run queued on two streams at once. */
  gbx_stream streams[2];
  gbx_event events[2];
  for (int s = 0; s < 2; ++s) {
    CHECK(gbx_stream_create(ctx, &streams[s]));
    CHECK(gbx_execute_async(model, names, inputs, n_in, streams[s], &events[s]));
  }
  int mismatches = 0;
  for (int s = 0; s < 2; ++s) {
    CHECK(gbx_event_wait(events[s]));
    int32_t done = 0;
    CHECK(gbx_event_query(events[s], &done));
    if (!done) return 1;
    for (size_t o = 0; o < n_out; ++o) {
      gbx_tensor t = NULL;
      void *a = NULL, *b = NULL;
      size_t na = 0, nb = 0;
      CHECK(gbx_event_output(events[s], o, &t));
      CHECK(gbx_tensor_data(t, &a, &na));
      CHECK(gbx_tensor_data(outputs[o], &b, &nb));
      if (na != nb || memcmp(a, b, na) != 0) ++mismatches;
      gbx_tensor_destroy(t);
    }
    gbx_event_destroy(events[s]);
    gbx_stream_destroy(streams[s]);
  }

  for (size_t o = 0; o < n_out; ++o) {
    gbx_io_desc d;
    CHECK(gbx_model_output(model, o, &d));
    int32_t dtype = 0;
    int64_t dims[kMaxRank];
    size_t rank = 0;
    CHECK(gbx_tensor_dtype(outputs[o], &dtype));
    CHECK(gbx_tensor_shape(outputs[o], dims, kMaxRank, &rank));
    printf("output %s:", d.name);
    float* data = NULL;
    size_t bytes = 0;
    CHECK(gbx_tensor_data(outputs[o], (void**)&data, &bytes));
    if (dtype == GBX_DTYPE_FLOAT32)
      for (size_t e = 0; e < bytes / sizeof(float); ++e) printf(" %g", data[e]);
    printf("\n");
    gbx_tensor_destroy(outputs[o]);
  }

  /* An error: a name the model does not have. */
  const char* bad = "no_such_input";
  gbx_tensor dummy[kMaxIo];
  gbx_status st = gbx_execute(model, &bad, inputs, 1, dummy, n_out);
  printf("bad input name -> status %d: %s\n", st, gbx_last_error_message());

  for (size_t i = 0; i < n_in; ++i) gbx_tensor_destroy(inputs[i]);
  gbx_model_destroy(model);
  gbx_context_destroy(ctx);
  CHECK(gbx_device_reset());
  if (mismatches) {
    fprintf(stderr, "asynchronous outputs differ from the synchronous ones\n");
    return 1;
  }
  printf("async outputs match\n");
  return st == GBX_OK ? 1 : 0;
}
