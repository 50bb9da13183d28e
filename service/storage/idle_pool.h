// IdlePool: objects kept for reuse between requests (S3Store's curl handles, each with its
// keep-alive connection and 2.5 MiB of buffers), without keeping a burst's worth of them forever.
// Take() returns the most recently returned object (its connection is the likeliest to be alive)
// or nothing; Give() keeps an object, then lets go of those idle longer than `max_idle` and of the
// oldest beyond `max_kept`, through `destroy`. A pool that kept every handle ever made held as many
// as the most concurrent requests after a storage outage, for ever (bench/soak/soak.py: autopard
// grew ~0.7 MiB a minute).
//
// Thread safety: Take and Give may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace autopar {

template <typename T>
class IdlePool {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  IdlePool(size_t max_kept, std::chrono::milliseconds max_idle, std::function<void(T)> destroy,
           Clock clock = nullptr)
      : max_kept_(max_kept),
        max_idle_(max_idle),
        destroy_(std::move(destroy)),
        clock_(clock ? std::move(clock) : Clock([] { return std::chrono::steady_clock::now(); })) {}
  ~IdlePool() {
    for (auto& [t, since] : idle_) destroy_(std::move(t));
  }
  IdlePool(const IdlePool&) = delete;
  IdlePool& operator=(const IdlePool&) = delete;

  std::optional<T> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.empty()) return std::nullopt;
    T t = std::move(idle_.back().first);
    idle_.pop_back();
    return t;
  }

  void Give(T t) {
    std::vector<T> drop;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto now = clock_();
      idle_.emplace_back(std::move(t), now);
      // Oldest first: those idle too long, then any beyond the limit.
      size_t n = 0;
      while (n < idle_.size() && (idle_.size() - n > max_kept_ || now - idle_[n].second > max_idle_)) ++n;
      for (size_t i = 0; i < n; ++i) drop.push_back(std::move(idle_[i].first));
      idle_.erase(idle_.begin(), idle_.begin() + static_cast<std::ptrdiff_t>(n));
    }
    for (auto& d : drop) destroy_(std::move(d));
  }

  size_t idle() const {
    std::lock_guard<std::mutex> lock(mu_);
    return idle_.size();
  }

 private:
  const size_t max_kept_;
  const std::chrono::milliseconds max_idle_;
  std::function<void(T)> destroy_;
  Clock clock_;
  mutable std::mutex mu_;
  std::vector<std::pair<T, std::chrono::steady_clock::time_point>> idle_;  // oldest first
};

}  // namespace autopar
