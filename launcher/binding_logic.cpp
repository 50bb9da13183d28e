#include <algorithm>
#include <cctype>
#include <set>

#include "launcher/launch.h"

namespace autopar {

std::vector<std::string> SplitDeviceList(const std::string& visible) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= visible.size()) {
    size_t comma = visible.find(',', pos);
    std::string item =
        visible.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    // Trim blanks; CUDA ignores them too.
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.pop_back();
    size_t first = 0;
    while (first < item.size() && std::isspace(static_cast<unsigned char>(item[first]))) ++first;
    item.erase(0, first);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

std::optional<GpuChoice> SelectGpu(const std::vector<std::string>& step_devices, int local_rank,
                                   int local_size) {
  if (step_devices.empty() || local_rank < 0 || local_size < 1) return std::nullopt;
  GpuChoice c;
  size_t n = step_devices.size();
  size_t idx = static_cast<size_t>(local_rank) % n;
  c.device = step_devices[idx];
  c.index = static_cast<int>(idx);
  c.shared = static_cast<size_t>(local_size) > n;
  return c;
}

Result<std::vector<int>> ParseCpuList(const std::string& text) {
  std::set<int> cpus;
  auto bad = [&] { return Status::Error("invalid CPU list '" + text + "'"); };
  auto num = [](const std::string& s, int& out) {
    if (s.empty() || s.size() > 7) return false;
    int v = 0;
    for (char c : s) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
      v = v * 10 + (c - '0');
    }
    out = v;
    return true;
  };
  std::string t = text;
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  if (t.empty()) return std::vector<int>{};
  size_t pos = 0;
  while (pos <= t.size()) {
    size_t comma = t.find(',', pos);
    std::string item = t.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t dash = item.find('-');
    int lo = 0, hi = 0;
    if (dash == std::string::npos) {
      if (!num(item, lo)) return bad();
      hi = lo;
    } else if (!num(item.substr(0, dash), lo) || !num(item.substr(dash + 1), hi) || hi < lo) {
      return bad();
    }
    if (hi - lo > 65536) return bad();
    for (int c = lo; c <= hi; ++c) cpus.insert(c);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return std::vector<int>(cpus.begin(), cpus.end());
}

std::string FormatCpuList(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

namespace {

// Cuts `cpus` into k contiguous blocks whose sizes differ by at most one (k <= cpus.size()).
std::vector<std::vector<int>> Blocks(const std::vector<int>& cpus, size_t k) {
  std::vector<std::vector<int>> out(k);
  size_t base = cpus.size() / k, extra = cpus.size() % k, pos = 0;
  for (size_t r = 0; r < k; ++r) {
    size_t len = base + (r < extra ? 1 : 0);
    out[r].assign(cpus.begin() + static_cast<std::ptrdiff_t>(pos),
                  cpus.begin() + static_cast<std::ptrdiff_t>(pos + len));
    pos += len;
  }
  return out;
}

}  // namespace

std::vector<std::vector<int>> SplitCpus(const CpuSplitInput& in) {
  if (in.local_size < 1) return {};
  std::vector<int> allowed = in.allowed;
  std::sort(allowed.begin(), allowed.end());
  allowed.erase(std::unique(allowed.begin(), allowed.end()), allowed.end());
  if (allowed.empty()) return {};
  const size_t k = static_cast<size_t>(in.local_size);
  const std::set<int> allowed_set(allowed.begin(), allowed.end());

  if (allowed.size() < k) {
    std::vector<std::vector<int>> out(k);
    for (size_t r = 0; r < k; ++r) out[r] = {allowed[r % allowed.size()]};
    return out;
  }

  // Each domain's allowed CPUs; CPUs in no domain form one more group at the end.
  std::vector<std::vector<int>> dom_cpus;
  std::set<int> in_domain;
  for (const auto& d : in.domains) {
    std::vector<int> cpus;
    for (int c : d) {
      if (allowed_set.count(c) && !in_domain.count(c)) {
        cpus.push_back(c);
        in_domain.insert(c);
      }
    }
    std::sort(cpus.begin(), cpus.end());
    dom_cpus.push_back(cpus);
  }
  std::vector<int> rest;
  for (int c : allowed) {
    if (!in_domain.count(c)) rest.push_back(c);
  }

  // NUMA-near placement: every rank names a domain with enough CPUs for the ranks placed in it.
  bool near = in.rank_domain.size() == k && !dom_cpus.empty();
  std::vector<std::vector<size_t>> ranks_in(dom_cpus.size());
  if (near) {
    for (size_t r = 0; r < k && near; ++r) {
      int d = in.rank_domain[r];
      if (d < 0 || static_cast<size_t>(d) >= dom_cpus.size()) {
        near = false;
      } else {
        ranks_in[static_cast<size_t>(d)].push_back(r);
      }
    }
    for (size_t d = 0; d < dom_cpus.size() && near; ++d) {
      if (ranks_in[d].size() > dom_cpus[d].size()) near = false;
    }
  }
  std::vector<std::vector<int>> out(k);
  if (near) {
    for (size_t d = 0; d < dom_cpus.size(); ++d) {
      if (ranks_in[d].empty()) continue;
      auto blocks = Blocks(dom_cpus[d], ranks_in[d].size());
      for (size_t i = 0; i < ranks_in[d].size(); ++i) out[ranks_in[d][i]] = blocks[i];
    }
    return out;
  }
  std::vector<int> ordered;
  for (const auto& d : dom_cpus) ordered.insert(ordered.end(), d.begin(), d.end());
  ordered.insert(ordered.end(), rest.begin(), rest.end());
  auto blocks = Blocks(ordered, k);
  for (auto& b : blocks) std::sort(b.begin(), b.end());
  return blocks;
}

}  // namespace autopar
