#include "comm/rank_table.h"

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

namespace gearbox::comm {
namespace {
using nlohmann::json;

Status invalid(const std::string& source, const std::string& what) {
  return make_error(ErrorCode::RANK_TABLE_INVALID_JSON, source, ": ", what);
}

// HCCL writes numbers as strings ("0"); accept both.
Result<int> number(const json& obj, const char* key, const std::string& source, const std::string& where) {
  if (!obj.is_object() || !obj.contains(key)) return invalid(source, where + " lacks \"" + key + "\"");
  const json& v = obj[key];
  if (v.is_number_integer()) return v.get<int>();
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (!s.empty() && s.size() < 9 && s.find_first_not_of("0123456789") == std::string::npos) return std::stoi(s);
  }
  return invalid(source, where + " \"" + key + "\" is " + v.dump() + ", not a non-negative integer");
}

Result<std::string> text(const json& obj, const char* key, const std::string& source, const std::string& where) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_string())
    return invalid(source, where + " lacks the string \"" + key + "\"");
  return obj[key].get<std::string>();
}
}  // namespace

Result<RankTable> parse_rank_table(const std::string& body, const std::string& source) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return invalid(source, "not valid JSON (python3 -m json.tool FILE shows where)");
  if (!j.is_object()) return invalid(source, "the top level is not a JSON object");
  RankTable t;
  GBX_ASSIGN_OR_RETURN(t.version, text(j, "version", source, "the table"));
  GBX_ASSIGN_OR_RETURN(t.server_count, number(j, "server_count", source, "the table"));
  if (j.contains("status") && j["status"].is_string()) t.status = j["status"].get<std::string>();
  if (!j.contains("server_list") || !j["server_list"].is_array()) return invalid(source, "\"server_list\" is missing or not an array");
  const json& servers = j["server_list"];
  if (int(servers.size()) != t.server_count)
    return make_error(ErrorCode::RANK_TABLE_COUNT_MISMATCH, source, ": server_count is ", t.server_count,
                      " but server_list has ", servers.size(), " servers");
  std::map<int, RankEntry> by_rank;
  for (size_t s = 0; s < servers.size(); ++s) {
    std::string where = "server_list[" + std::to_string(s) + "]";
    GBX_ASSIGN_OR_RETURN(std::string server_id, text(servers[s], "server_id", source, where));
    if (!servers[s].contains("device") || !servers[s]["device"].is_array())
      return invalid(source, where + " (" + server_id + ") lacks a \"device\" array");
    const json& devices = servers[s]["device"];
    if (devices.empty())
      return make_error(ErrorCode::RANK_TABLE_MISSING_DEVICE, source, ": ", where, " (", server_id, ") lists no device");
    for (size_t d = 0; d < devices.size(); ++d) {
      std::string dw = where + ".device[" + std::to_string(d) + "]";
      RankEntry e;
      e.server_id = server_id;
      GBX_ASSIGN_OR_RETURN(e.rank_id, number(devices[d], "rank_id", source, dw));
      GBX_ASSIGN_OR_RETURN(e.device_id, number(devices[d], "device_id", source, dw));
      if (devices[d].contains("device_ip") && devices[d]["device_ip"].is_string())
        e.device_ip = devices[d]["device_ip"].get<std::string>();
      auto [it, fresh] = by_rank.emplace(e.rank_id, e);
      if (!fresh)
        return make_error(ErrorCode::RANK_TABLE_DUPLICATE_RANK, source, ": rank_id ", e.rank_id, " appears twice: on ",
                          it->second.server_id, " device ", it->second.device_id, " and on ", server_id, " device ",
                          e.device_id);
    }
  }
  int n = int(by_rank.size());
  for (int r = 0; r < n; ++r)
    if (!by_rank.count(r)) {
      int highest = by_rank.rbegin()->first;
      return make_error(ErrorCode::RANK_TABLE_MISSING_DEVICE, source, ": no device has rank_id ", r, " (", n,
                        " devices, highest rank_id ", highest, "): rank_ids must be 0..", n - 1);
    }
  for (auto& [r, e] : by_rank) t.ranks.push_back(e);
  std::vector<int> world;
  for (int r = 0; r < n; ++r) world.push_back(r);
  t.groups["world"] = world;
  if (j.contains("group_list")) {
    if (!j["group_list"].is_array()) return invalid(source, "\"group_list\" is not an array");
    for (size_t g = 0; g < j["group_list"].size(); ++g) {
      const json& grp = j["group_list"][g];
      std::string where = "group_list[" + std::to_string(g) + "]";
      GBX_ASSIGN_OR_RETURN(std::string name, text(grp, "group_name", source, where));
      if (!grp.contains("rank_list") || !grp["rank_list"].is_array())
        return invalid(source, where + " (" + name + ") lacks a \"rank_list\" array");
      std::vector<int> ranks;
      for (const json& r : grp["rank_list"]) {
        if (r.is_number_integer()) ranks.push_back(r.get<int>());
        else if (r.is_string() && !r.get<std::string>().empty() &&
                 r.get<std::string>().find_first_not_of("0123456789") == std::string::npos && r.get<std::string>().size() < 9)
          ranks.push_back(std::stoi(r.get<std::string>()));
        else return invalid(source, where + " (" + name + ") has the rank " + r.dump() + ", not an integer");
      }
      Status s = add_group(t, name, ranks);
      if (!s.ok()) return s.with_context(source + ": ");
    }
  }
  return t;
}

Result<RankTable> load_rank_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(ErrorCode::FILE_NOT_FOUND, "rank table ", path, " cannot be opened");
  std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_rank_table(body, path);
}

Status add_group(RankTable& table, const std::string& name, const std::vector<int>& ranks) {
  if (ranks.empty())
    return make_error(ErrorCode::RANK_TABLE_UNKNOWN_GROUP_MEMBER, "group '", name, "' has no ranks");
  std::set<int> seen;
  for (int r : ranks) {
    if (r < 0 || r >= table.size())
      return make_error(ErrorCode::RANK_TABLE_UNKNOWN_GROUP_MEMBER, "group '", name, "' names rank ", r,
                        ", which the rank table lacks (it has ranks 0..", table.size() - 1, ")");
    if (!seen.insert(r).second)
      return make_error(ErrorCode::RANK_TABLE_UNKNOWN_GROUP_MEMBER, "group '", name, "' names rank ", r, " twice");
  }
  table.groups[name] = ranks;
  return Status::OK();
}

}  // namespace gearbox::comm
