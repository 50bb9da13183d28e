// The local side of a transfer, as leveldb's Env: the files a transfer reads and writes and the
// threads its parts run on. The transfer engine (transfer.cpp) does no I/O of its own; it uses
// TransferOptions::env, or DefaultTransferEnv() (POSIX files and std::thread,
// transfer_env_posix.cpp). Tests give an in-memory one (memory_env_for_test.h) and need neither a
// filesystem nor threads to test the engine's logic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "autopar/status.h"

namespace autopar {

class TransferEnv {
 public:
  virtual ~TransferEnv() = default;

  // Opens a file to upload; `*fd` is what ReadAt takes and, for a store that ReadsFiles()
  // (storage.h), a real file descriptor; `*mode` its permission bits. Errors: "<path>: <reason>".
  virtual Status OpenForRead(const std::string& path, int* fd, uint64_t* size, uint32_t* mode) = 0;
  // Creates or truncates `path` to `size` bytes with exactly the permission bits `mode`, first
  // making its missing parent directories with `dir_mode`. Errors name the path.
  virtual Status CreateSized(const std::string& path, uint32_t mode, uint32_t dir_mode,
                             uint64_t size, int* fd) = 0;
  // All `size` bytes at `offset`, or false with errno set (a short file is EIO-like: errno 0).
  virtual bool ReadAt(int fd, char* buf, size_t size, uint64_t offset) = 0;
  virtual bool WriteAt(int fd, const char* buf, size_t size, uint64_t offset) = 0;
  // fsync; false with errno set.
  virtual bool Sync(int fd) = 0;
  virtual void Close(int fd) = 0;
  // Renames `from` over `to` and makes the rename durable (the directory synced); false with
  // errno set.
  virtual bool Replace(const std::string& from, const std::string& to) = 0;
  virtual void Remove(const std::string& path) = 0;
  // Runs body(0) .. body(n - 1) at the same time and returns once all have returned.
  virtual void RunConcurrently(size_t n, const std::function<void(size_t)>& body) = 0;
  // The workers that send one upload's parts: body(0) .. body(n - 1), each taking parts until
  // none is left; returns once all have returned. An env may run them on workers it shares with
  // other transfers, fewer than n at once (autopard: `concurrency` requests in flight on the
  // node, whatever the number of uploads). Default: RunConcurrently.
  virtual void RunWorkers(size_t n, const std::function<void(size_t)>& body) { RunConcurrently(n, body); }
};

// POSIX files and std::thread. Thread-safe; never destroyed.
TransferEnv* DefaultTransferEnv();

}  // namespace autopar
