/* The C side of bench/health/heartbeat_bench.py: times the checkpoint C API's heartbeat as a
 * program sees it (autopar/ckpt_c.h, libautopar.so; handed to the library's background thread),
 * interleaved with the same heartbeat carrying the step's samples, tokens and loss, with that one
 * sent synchronously (autopar_ckpt_heartbeat_sync, after an untimed flush of the background
 * thread), and with a floor: one request line that autopard answers with an error right after
 * decoding it (connect, accept, one line each way; no authorization, no state database, no
 * failure handling), and with a no-op (nothing between the two clock readings: the machine's
 * noise).
 *
 *     heartbeat_c ROUNDS WARMUP FIRST_STEP OUT [STEP_US]
 *
 * Needs the task's environment (AUTOPAR_SOCKET, SLURM_JOB_ID, RANK). Before each call it sleeps
 * STEP_US microseconds (default 0; untimed: a training step). Writes one line per timed call to
 * OUT, "<variant> <nanoseconds>", variant plain|full|sync|floor|noop; each round runs the five in
 * a rotated order (plain full sync floor noop, full sync floor noop plain, ...) so that the
 * machine's noise falls on all of them alike. Exits 1 on the first failed call. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "autopar/ckpt_c.h"

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* One request line that autopard rejects at decoding; returns 0 once its reply line is read. */
static int floor_call(const char* path, char* err, size_t errlen) {
  static const char kLine[] = "{\"v\":1,\"op\":\"bench-floor\"}\n";
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (strlen(path) >= sizeof addr.sun_path) {
    snprintf(err, errlen, "socket path too long: %s", path);
    return -1;
  }
  strcpy(addr.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(err, errlen, "socket: %s", strerror(errno));
    return -1;
  }
  int rc = -1;
  if (connect(fd, (struct sockaddr*)&addr, sizeof addr) != 0) {
    snprintf(err, errlen, "connect %s: %s", path, strerror(errno));
  } else if (send(fd, kLine, sizeof kLine - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof kLine - 1)) {
    snprintf(err, errlen, "send: %s", strerror(errno));
  } else {
    char buf[4096];
    for (;;) {
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        snprintf(err, errlen, "connection closed before the reply");
        break;
      }
      if (memchr(buf, '\n', (size_t)n)) {
        rc = 0;
        break;
      }
    }
  }
  close(fd);
  return rc;
}

int main(int argc, char** argv) {
  if (argc != 5 && argc != 6) {
    fprintf(stderr, "usage: heartbeat_c ROUNDS WARMUP FIRST_STEP OUT [STEP_US]\n");
    return 2;
  }
  const long rounds = atol(argv[1]), warmup = atol(argv[2]);
  const long step_us = argc == 6 ? atol(argv[5]) : 0;
  const struct timespec pause = {step_us / 1000000, (step_us % 1000000) * 1000};
  long long step = atoll(argv[3]);
  const char* socket_path = getenv("AUTOPAR_SOCKET");
  if (!socket_path || !*socket_path) {
    fprintf(stderr, "heartbeat_c: AUTOPAR_SOCKET is not set\n");
    return 1;
  }
  FILE* out = fopen(argv[4], "w");
  if (!out) {
    fprintf(stderr, "heartbeat_c: %s: %s\n", argv[4], strerror(errno));
    return 1;
  }
  enum { kVariants = 5 };
  static const char* const kNames[kVariants] = {"plain", "full", "sync", "floor", "noop"};
  /* Kept in memory and written at the end: no file I/O between the timed calls. */
  long long* ns = malloc(sizeof(long long) * kVariants * (size_t)rounds);
  int* variant = malloc(sizeof(int) * kVariants * (size_t)rounds);
  if (!ns || !variant) return 1;
  size_t n = 0;
  char err[512];
  for (long r = -warmup; r < rounds; ++r) {
    for (int k = 0; k < kVariants; ++k) {
      const int v = (int)((r + warmup + k) % kVariants);
      int rc = 0;
      if (v == 2 && autopar_ckpt_heartbeat_flush(5000, err, sizeof err) != 0) {
        fprintf(stderr, "heartbeat_c: flush: %s\n", err);
        return 1;
      }
      if (step_us > 0) nanosleep(&pause, NULL);
      /* Samples and tokens of a global batch of 64 sequences of 128 tokens; a slowly falling
       * loss (no spike). */
      const double loss = 2.0 + 1.0 / (double)(step + 1);
      int requested = 0;
      const long long t0 = now_ns();
      if (v == 0) {
        rc = autopar_ckpt_heartbeat(step, err, sizeof err);
      } else if (v == 1) {
        rc = autopar_ckpt_heartbeat_progress(step, 64, 64 * 128, 1, loss, &requested, err,
                                             sizeof err);
      } else if (v == 2) {
        rc = autopar_ckpt_heartbeat_sync(step, 64, 64 * 128, 1, loss, &requested, err,
                                         sizeof err);
      } else if (v == 3) {
        rc = floor_call(socket_path, err, sizeof err);
      }
      const long long dt = now_ns() - t0;
      if (rc != 0) {
        fprintf(stderr, "heartbeat_c: %s: %s\n", kNames[v], err);
        return 1;
      }
      if (v < 3) ++step;
      if (r >= 0) {
        ns[n] = dt;
        variant[n++] = v;
      }
    }
  }
  if (autopar_ckpt_heartbeat_flush(10000, err, sizeof err) != 0 ||
      autopar_ckpt_heartbeat(step, err, sizeof err) != 0) {  /* reports a failed last send */
    fprintf(stderr, "heartbeat_c: the last heartbeats: %s\n", err);
    return 1;
  }
  ++step;
  for (size_t i = 0; i < n; ++i) fprintf(out, "%s %lld\n", kNames[variant[i]], ns[i]);
  free(ns);
  free(variant);
  if (fclose(out) != 0) return 1;
  printf("%lld\n", step);
  return 0;
}
