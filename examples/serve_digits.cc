// Export, then serve: trains the digits CNN (examples/digits_cnn.h), exports it to ONNX, starts
// `gearbox serve` on 127.0.0.1 with the exported model, sends held-out digits as KServe v2
// requests (docs/serving.md) and checks that every served answer is the trained network's own
// (logits within 1e-4, the same class). Exits 0 when they all agree.
//
//   /usr/bin/python3 scripts/export_digits.py /tmp/digits
//   build/serve_digits /tmp/digits build/gearbox [WORK_DIR] [epochs]
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "digits_cnn.h"
#include "gearbox/nn_graph.hpp"

namespace nn = gbx::nn;
extern char** environ;

namespace {

// `gearbox serve --model digits=MODEL --port 0` as a child whose stdout we read: the server
// picks a free port and prints it ("gearbox serve: listening on http://127.0.0.1:PORT").
struct Server {
  pid_t pid = -1;
  int port = -1;
  FILE* out = nullptr;  // its stdout, kept open until it exits (a closed pipe would SIGPIPE it)

  Server(const std::string& gearbox, const std::string& model) {
    int fds[2];
    if (pipe(fds) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    std::vector<std::string> args = {gearbox,     "serve",  "--model", "digits=" + model, "--host",
                                     "127.0.0.1", "--port", "0",       "--metrics-port",  "-1"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = posix_spawn(&pid, gearbox.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (rc != 0) {
      pid = -1;
      close(fds[0]);
      return;
    }
    // The first line tells the port (or the server exits with its error on stderr).
    out = fdopen(fds[0], "r");
    char line[512];
    const std::string marker = "listening on http://127.0.0.1:";
    while (port < 0 && std::fgets(line, sizeof line, out)) {
      const std::string s = line;
      if (const size_t at = s.find(marker); at != std::string::npos) port = std::atoi(s.c_str() + at + marker.size());
    }
  }
  ~Server() {
    if (pid > 0) {
      kill(pid, SIGTERM);  // drains and exits 0 (docs/serving.md)
      int status = 0;
      waitpid(pid, &status, 0);
    }
    if (out) std::fclose(out);
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s DIGITS_DIR GEARBOX [WORK_DIR] [epochs]   (DIGITS_DIR from scripts/export_digits.py)\n",
                 argv[0]);
    return 2;
  }
  const std::string dir = argv[1], gearbox = argv[2];
  const std::filesystem::path work = argc > 3 ? argv[3] : ".";
  digits::TrainOptions options;
  options.epochs = argc > 4 ? std::atoi(argv[4]) : 3;
  try {
    // Train (eager), then export what will be served: one digit per request.
    nn::Tensor x = nn::reshape(nn::load_npy(dir + "/x.npy"), {-1, 1, 8, 8}), y = nn::load_npy(dir + "/y.npy");
    const digits::Split data = digits::split(x, y);
    nn::manual_seed(0);
    digits::DigitsCnn net;
    digits::train(net, data, options);
    net.eval();
    std::filesystem::create_directories(work);
    const std::string model = (work / "digits_cnn.onnx").string();
    nn::TraceOptions names;  // the names the KServe requests use
    names.input_names = {"image"};
    names.output_names = {"logits"};
    nn::export_onnx(net, nn::slice(data.x_test, 0, 0, 1), model, names);

    Server server(gearbox, model);
    if (server.port < 0) {
      std::fprintf(stderr, "gearbox serve did not start (its error is above)\n");
      return 1;
    }
    std::printf("serving %s on http://127.0.0.1:%d\n", model.c_str(), server.port);
    httplib::Client client("127.0.0.1", server.port);
    const int requests = 10;
    int agree = 0;
    for (int i = 0; i < requests; ++i) {
      nn::Tensor image = nn::slice(data.x_test, 0, i, i + 1);
      nlohmann::json request = {
          {"inputs",
           {{{"name", "image"}, {"shape", {1, 1, 8, 8}}, {"datatype", "FP32"}, {"data", image.to_float_vector()}}}}};
      auto response = client.Post("/v2/models/digits/infer", request.dump(), "application/json");
      if (!response || response->status != 200) {
        std::fprintf(stderr, "request %d failed: %s\n", i,
                     response ? response->body.c_str() : httplib::to_string(response.error()).c_str());
        return 1;
      }
      const std::vector<float> served =
          nlohmann::json::parse(response->body).at("outputs").at(0).at("data").get<std::vector<float>>();
      std::vector<float> local;
      {
        nn::NoGradGuard no_grad;
        local = net(image).to_float_vector();
      }
      float diff = 0;
      for (size_t k = 0; k < local.size(); ++k) diff = std::max(diff, std::fabs(served[k] - local[k]));
      const auto served_class = std::max_element(served.begin(), served.end()) - served.begin();
      const auto local_class = std::max_element(local.begin(), local.end()) - local.begin();
      const bool same = served.size() == local.size() && diff <= 1e-4f && served_class == local_class;
      agree += same;
      std::printf("digit %d (label %lld): served class %td, local class %td, max |logit difference| %.2g%s\n", i,
                  static_cast<long long>(data.y_test.to_int64_vector()[static_cast<size_t>(i)]), served_class,
                  local_class, static_cast<double>(diff), same ? "" : "  MISMATCH");
    }
    std::printf("served answers equal to the local prediction: %d of %d\n", agree, requests);
    return agree == requests ? 0 : 1;
  } catch (const nn::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
