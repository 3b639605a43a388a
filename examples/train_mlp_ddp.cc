// Trains examples/train_mlp.cc's 64-32-10 MLP on sklearn's digits data-parallel: every rank holds a
// replica (rank 0's initial weights), takes its B/N rows of each global batch from a
// DistributedSampler, and averages gradients with the other ranks (bucketed allreduce, started from
// backward) before its local optimizer step. Run it under the launcher:
//
//   /usr/bin/python3 scripts/export_digits.py /tmp/digits
//   build/gearbox launch -n 2 -- build/train_mlp_ddp /tmp/digits [--epochs 20] [--batch 50]
//       [--compression none|bf16|fp16] [--bucket-kb 25600] [--clip MAX_NORM]
//
// Without a launcher it runs as a one-rank job (GEARBOX_WORLD_SIZE unset: rank 0 of 1).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "digits_accuracy.h"
#include "gearbox/nn_distributed.hpp"

namespace nn = gbx::nn;

namespace {

double accuracy(nn::Module& net, const nn::Tensor& x, const nn::Tensor& y) {
  nn::NoGradGuard no_grad;
  return digits::accuracy(net(x), y);
}

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s DIGITS_DIR [--epochs N] [--batch B] [--compression "
               "none|bf16|fp16] [--bucket-kb K] "
               "[--clip MAX_NORM]\n  (DIGITS_DIR from "
               "scripts/export_digits.py; start it with gearbox launch -n N "
               "-- ...)\n",
               argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(argv[0]);
  int epochs = 20;
  int64_t batch = 50;  // the global batch: each of the N ranks takes batch / N rows
  double clip = 0;
  size_t bucket_kb = 25600;
  nn::GradCompression compression = nn::GradCompression::None;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage(argv[0]);
    const char* v = argv[++i];
    if (a == "--epochs") {
      epochs = std::atoi(v);
    } else if (a == "--batch") {
      batch = std::atoll(v);
    } else if (a == "--clip") {
      clip = std::atof(v);
    } else if (a == "--bucket-kb") {
      bucket_kb = static_cast<size_t>(std::atoll(v));
    } else if (a == "--compression") {
      if (!std::strcmp(v, "bf16")) {
        compression = nn::GradCompression::BFloat16;
      } else if (!std::strcmp(v, "fp16")) {
        compression = nn::GradCompression::Float16;
      } else if (std::strcmp(v, "none")) {
        return usage(argv[0]);
      }
    } else {
      return usage(argv[0]);
    }
  }
  try {
    auto pg = nn::ProcessGroup::from_environment();
    const int rank = pg->rank(), size = pg->size();
    if (batch % size != 0) {
      std::fprintf(stderr, "--batch %lld does not divide by the %d ranks\n", static_cast<long long>(batch), size);
      return 2;
    }
    const std::string dir = argv[1];
    nn::Tensor x = nn::load_npy(dir + "/x.npy"), y = nn::load_npy(dir + "/y.npy");
    const int64_t n = x.dim(0), n_train = 1500;
    nn::Tensor x_train = nn::slice(x, 0, 0, n_train), y_train = nn::slice(y, 0, 0, n_train);

    nn::manual_seed(0);  // only rank 0's draw matters: DistributedDataParallel broadcasts it
    auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(64, 32), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(32, 10)});
    nn::DistributedDataParallel ddp(net, pg, {.bucket_bytes = bucket_kb * 1024, .compression = compression});
    nn::Adam opt(ddp.parameters(), {.lr = 1e-2});
    nn::DistributedSampler sampler(n_train, size, rank, {.seed = 0, .drop_last = true});
    const int64_t local = batch / size;
    auto start = std::chrono::steady_clock::now();
    for (int e = 0; e < epochs; ++e) {
      sampler.set_epoch(static_cast<uint64_t>(e));
      std::vector<int64_t> idx = sampler.indices();
      double total = 0;
      int64_t steps = 0;
      for (size_t b = 0; b + static_cast<size_t>(local) <= idx.size(); b += static_cast<size_t>(local), ++steps) {
        std::vector<int64_t> rows(idx.begin() + static_cast<std::ptrdiff_t>(b),
                                  idx.begin() + static_cast<std::ptrdiff_t>(b) + local);
        nn::Tensor loss = nn::cross_entropy(ddp(nn::index_rows(x_train, rows)), nn::index_rows(y_train, rows));
        opt.zero_grad();
        loss.backward();
        ddp.synchronize_gradients();
        if (clip > 0) nn::clip_grad_norm(ddp.parameters(), clip);
        opt.step();
        total += loss.item();
      }
      // The global batch's mean loss: each rank's mean over its equal share, averaged.
      const double mean = pg->average(total / static_cast<double>(steps));
      if (rank == 0) std::printf("epoch %2d  loss %.4f\n", e + 1, mean);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rank == 0) {
      net->eval();
      const nn::DDPStats& st = ddp.stats();
      std::printf(
          "held-out accuracy: %.2f%% (%lld digits); %d ranks, global "
          "batch %lld, %zu gradient bucket(s), "
          "%zu bytes allreduced per step, %.2f s training\n",
          100 * accuracy(*net, nn::slice(x, 0, n_train, n), nn::slice(y, 0, n_train, n)),
          static_cast<long long>(n - n_train), size, static_cast<long long>(batch), st.buckets, st.bucket_bytes_on_wire,
          seconds);
    }
  } catch (const nn::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
