// The rendezvous key-value store the ranks of a job share: how they find each other (Gloo
// publishes every rank's address in it) and where the Tracer publishes what each rank is doing.
//
//   file:DIR          a shared folder, one file per key; one machine, or NFS
//   tcp://HOST:PORT   a small key-value server on the master (TcpStoreServer, cpp-httplib);
//                     `gearbox launch` runs it, or rank 0 does when MASTER_ADDR/PORT are set
//                     without GEARBOX_STORE (torch.distributed's convention).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"

namespace httplib {
class Server;
}

namespace gearbox::comm {

class KvStore {
 public:
  virtual ~KvStore() = default;
  virtual Status set(const std::string& key, const std::string& value) = 0;
  // The value, or nullopt when the key is not (yet) there. Never blocks for long.
  virtual Result<std::optional<std::string>> try_get(const std::string& key) = 0;
  // Waits until every key exists (polling), COMM_SETUP_FAILED after timeout naming the missing.
  virtual Status wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  Result<std::string> get(const std::string& key, std::chrono::milliseconds timeout);
  virtual std::string describe() const = 0;
};

// "file:DIR" or "tcp://HOST:PORT".
Result<std::shared_ptr<KvStore>> open_store(const std::string& spec);
// Keys of `inner` under "PREFIX." (one namespace per group or per job).
std::shared_ptr<KvStore> prefixed_store(std::shared_ptr<KvStore> inner, const std::string& prefix);

// The server side of tcp://: an in-memory map behind PUT/GET /kv/KEY.
class TcpStoreServer {
 public:
  // port 0 picks a free one (port() says which).
  static Result<std::unique_ptr<TcpStoreServer>> start(const std::string& host, int port);
  ~TcpStoreServer();
  int port() const { return port_; }

 private:
  TcpStoreServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::mutex mu_;
  std::map<std::string, std::string> kv_;
  int port_ = 0;
};

}  // namespace gearbox::comm
