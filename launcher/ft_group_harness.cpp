// ft-group-harness WORLD DIR [MIN_WORLD]: the launchers' side of a fault-tolerant group, the real
// FtGroup and quorum (ft_group_testing.h), for tests of autopar.ft with real processes on one
// machine without Slurm (python/tests/test_ft_group.py). Prints "rank R SOCKET" for each rank
// (its program's $AUTOPAR_FT_SOCKET), then "ready", and pumps the launchers until told on stdin:
//   replaced R   rank R's program was replaced (its launcher counts it; the next one joins anew)
//   drop R       rank R's launcher is lost with its node (no spare: the group goes on without it)
//   quit         (or end of input)
// A group that cannot go on prints "error REASON" and exits 1.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "launcher/ft_group_testing.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: ft-group-harness WORLD DIR [MIN_WORLD]\n";
    return 2;
  }
  const int world = std::atoi(argv[1]);
  const int min_world = argc > 3 ? std::atoi(argv[3]) : 0;
  autopar::Launchers launchers(world, -1, {}, min_world, argv[2]);
  for (int r = 0; r < world; ++r) {
    std::cout << "rank " << r << " " << launchers.ft[static_cast<size_t>(r)]->socket_path() << "\n";
  }
  std::cout << "ready" << std::endl;
  fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
  std::string input;
  for (;;) {
    pollfd in{0, POLLIN, 0};
    if (poll(&in, 1, 5) > 0) {
      char buf[256];
      const ssize_t n = read(0, buf, sizeof(buf));
      if (n <= 0) return 0;
      input.append(buf, static_cast<size_t>(n));
    }
    for (size_t nl; (nl = input.find('\n')) != std::string::npos; input.erase(0, nl + 1)) {
      std::istringstream line(input.substr(0, nl));
      std::string cmd;
      int rank = -1;
      line >> cmd >> rank;
      if (cmd == "quit") return 0;
      if (rank < 0 || rank >= world || !launchers.ft[static_cast<size_t>(rank)]) continue;
      if (cmd == "replaced") {
        launchers.ft[static_cast<size_t>(rank)]->ProgramEnded();
        launchers.ft[static_cast<size_t>(rank)]->CountReplacement();
      } else if (cmd == "drop") {
        launchers.Drop(rank);
      }
    }
    if (auto why = launchers.PumpOnce()) {
      std::cout << "error " << *why << std::endl;
      return 1;
    }
  }
}
