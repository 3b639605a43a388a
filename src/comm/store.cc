#include "comm/store.h"

#include <httplib.h>

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace gearbox::comm {

Status KvStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  for (size_t i = 0; i < keys.size();) {
    GBX_ASSIGN_OR_RETURN(auto v, try_get(keys[i]));
    if (v) {
      ++i;
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::string missing;
      for (size_t j = i; j < keys.size(); ++j) missing += (missing.empty() ? "" : ", ") + keys[j];
      return make_error(ErrorCode::COMM_SETUP_FAILED, "store ", describe(), ": keys not set after ",
                        timeout.count(), " ms: ", missing);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
  return Status::OK();
}

Result<std::string> KvStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  GBX_RETURN_IF_ERROR(wait({key}, timeout));
  GBX_ASSIGN_OR_RETURN(auto v, try_get(key));
  if (!v) return make_error(ErrorCode::COMM_SETUP_FAILED, "store ", describe(), ": key ", key, " vanished");
  return *v;
}

namespace {

// One file per key in a shared folder, written to a temporary name and renamed, so a reader
// never sees half a value. (Gloo's own FileStore has the same layout idea but refuses to
// overwrite a key, which the Tracer's heartbeat does every 500 ms.)
class FileKvStore : public KvStore {
 public:
  explicit FileKvStore(std::string dir) : dir_(std::move(dir)) {}
  Status set(const std::string& key, const std::string& value) override {
    std::string path = path_of(key);
    std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter_++);
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(value.data(), std::streamsize(value.size()));
      if (!out) return make_error(ErrorCode::COMM_SETUP_FAILED, "file store ", dir_, ": cannot write ", tmp);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      return make_error(ErrorCode::COMM_SETUP_FAILED, "file store ", dir_, ": cannot rename ", tmp, " to ", path, ": ",
                        std::strerror(errno));
    return Status::OK();
  }
  Result<std::optional<std::string>> try_get(const std::string& key) override {
    std::ifstream in(path_of(key), std::ios::binary);
    if (!in) return std::optional<std::string>();
    return std::optional<std::string>(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
  }
  std::string describe() const override { return "file:" + dir_; }

 private:
  std::string path_of(const std::string& key) const {
    std::string name;
    for (char c : key) {
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') {
        name += c;
      } else {
        char buf[4];
        std::snprintf(buf, sizeof(buf), "%%%02X", static_cast<unsigned char>(c));
        name += buf;
      }
    }
    return dir_ + "/" + name;
  }
  std::string dir_;
  std::atomic<uint64_t> counter_{0};
};

class TcpKvStore : public KvStore {
 public:
  TcpKvStore(std::string host, int port) : host_(std::move(host)), port_(port), client_(host_, port_) {
    client_.set_connection_timeout(std::chrono::seconds(5));
    client_.set_read_timeout(std::chrono::seconds(30));
    client_.set_keep_alive(true);
  }
  Status set(const std::string& key, const std::string& value) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (int attempt = 0;; ++attempt) {
      auto r = client_.Put(("/kv/" + key).c_str(), value, "application/octet-stream");
      if (r && r->status == 200) return Status::OK();
      // The master may not be listening yet at job start: retry for a while.
      if (attempt >= 300) return unreachable("set " + key, r ? std::to_string(r->status) : httplib::to_string(r.error()));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  Result<std::optional<std::string>> try_get(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (int attempt = 0;; ++attempt) {
      auto r = client_.Get(("/kv/" + key).c_str());
      if (r && r->status == 200) return std::optional<std::string>(r->body);
      if (r && r->status == 404) return std::optional<std::string>();
      if (attempt >= 300) return unreachable("get " + key, r ? std::to_string(r->status) : httplib::to_string(r.error()));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  std::string describe() const override { return "tcp://" + host_ + ":" + std::to_string(port_); }

 private:
  Status unreachable(const std::string& what, const std::string& why) {
    return make_error(ErrorCode::COMM_SETUP_FAILED, "store ", describe(), ": ", what, " failed: ", why);
  }
  std::string host_;
  int port_;
  std::mutex mu_;  // httplib::Client is not safe for concurrent calls
  httplib::Client client_;
};

class PrefixKvStore : public KvStore {
 public:
  PrefixKvStore(std::shared_ptr<KvStore> inner, std::string prefix) : inner_(std::move(inner)), prefix_(prefix + ".") {}
  Status set(const std::string& key, const std::string& value) override { return inner_->set(prefix_ + key, value); }
  Result<std::optional<std::string>> try_get(const std::string& key) override { return inner_->try_get(prefix_ + key); }
  std::string describe() const override { return inner_->describe() + " (keys " + prefix_ + "*)"; }

 private:
  std::shared_ptr<KvStore> inner_;
  std::string prefix_;
};

}  // namespace

Result<std::shared_ptr<KvStore>> open_store(const std::string& spec) {
  if (spec.rfind("file:", 0) == 0) {
    std::string dir = spec.substr(5);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (!std::filesystem::is_directory(dir))
      return make_error(ErrorCode::COMM_SETUP_FAILED, "store ", spec, ": cannot create the folder ", dir,
                        ec ? ": " + ec.message() : "");
    return std::shared_ptr<KvStore>(std::make_shared<FileKvStore>(dir));
  }
  if (spec.rfind("tcp://", 0) == 0) {
    std::string hp = spec.substr(6);
    size_t colon = hp.rfind(':');
    int port = 0;
    if (colon != std::string::npos) {
      try {
        port = std::stoi(hp.substr(colon + 1));
      } catch (...) {
        port = 0;
      }
    }
    if (colon == std::string::npos || port <= 0 || port > 65535)
      return make_error(ErrorCode::COMM_SETUP_FAILED, "store ", spec, ": expected tcp://HOST:PORT with PORT in 1..65535");
    return std::shared_ptr<KvStore>(std::make_shared<TcpKvStore>(hp.substr(0, colon), port));
  }
  return make_error(ErrorCode::COMM_SETUP_FAILED, "store '", spec, "': expected file:DIR or tcp://HOST:PORT");
}

std::shared_ptr<KvStore> prefixed_store(std::shared_ptr<KvStore> inner, const std::string& prefix) {
  return std::make_shared<PrefixKvStore>(std::move(inner), prefix);
}

Result<std::unique_ptr<TcpStoreServer>> TcpStoreServer::start(const std::string& host, int port) {
  std::unique_ptr<TcpStoreServer> s(new TcpStoreServer());
  s->server_ = std::make_unique<httplib::Server>();
  TcpStoreServer* self = s.get();
  s->server_->Put(R"(/kv/(.+))", [self](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(self->mu_);
    self->kv_[req.matches[1]] = req.body;
    res.status = 200;
  });
  s->server_->Get(R"(/kv/(.+))", [self](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(self->mu_);
    auto it = self->kv_.find(req.matches[1]);
    if (it == self->kv_.end()) {
      res.status = 404;
      return;
    }
    res.set_content(it->second, "application/octet-stream");
  });
  if (port == 0) {
    s->port_ = s->server_->bind_to_any_port(host);
    if (s->port_ <= 0) return make_error(ErrorCode::COMM_SETUP_FAILED, "store server: cannot bind ", host, ":0");
  } else {
    if (!s->server_->bind_to_port(host, port))
      return make_error(ErrorCode::COMM_SETUP_FAILED, "store server: cannot bind ", host, ":", port,
                        " (in use by another job? pick another --master port)");
    s->port_ = port;
  }
  s->thread_ = std::thread([self] { self->server_->listen_after_bind(); });
  // A stop() that comes before the listening loop starts would be lost (and the join hang).
  while (!s->server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return s;
}

TcpStoreServer::~TcpStoreServer() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace gearbox::comm
