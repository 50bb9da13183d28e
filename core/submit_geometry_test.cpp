#include "core/submit_geometry.h"

#include <gtest/gtest.h>

namespace autopar {
namespace {

TEST(SubmitGeometry, SbatchLinesStopAtTheFirstCommand) {
  const std::string script =
      "#!/bin/bash\n"
      "#SBATCH --nodes=2-4 --ntasks-per-node=8  # a comment\n"
      "\n"
      "# a plain comment\n"
      "  #SBATCH -o out.txt\n"
      "echo hi\n"
      "#SBATCH --nodes=9\n";
  EXPECT_EQ(SbatchLineArgs(script),
            (std::vector<std::string>{"--nodes=2-4", "--ntasks-per-node=8", "-o", "out.txt"}));
  EXPECT_TRUE(SbatchLineArgs("").empty());
}

TEST(SubmitGeometry, NodesAndGpusInEverySpelling) {
  struct Case {
    std::vector<std::string> args;
    int64_t min, max, gpus;
  } cases[] = {
      {{"--nodes=2-4", "--ntasks-per-node=8"}, 2, 4, 8},
      {{"-N", "3", "--ntasks-per-node", "2"}, 3, 3, 2},
      {{"-N2-4"}, 2, 4, 0},
      {{"-N4", "--gpus-per-node=a100:4", "--ntasks-per-node=8"}, 4, 4, 4},
      {{"--nodes", "2-", "--gres=gpu:h100:8,shard:2"}, 2, 0, 8},
      {{"--nodes=4", "--nodes=1-2"}, 1, 2, 0},  // the later one wins (the command line)
      {{"job.sh", "-o", "x.txt", "--wrap=true"}, 0, 0, 0},
      {{"--nodes=x", "--ntasks-per-node=zero"}, 0, 0, 0},
  };
  for (const Case& c : cases) {
    SubmitGeometry g;
    ReadSubmitGeometry(c.args, &g);
    EXPECT_EQ(g.min_nodes, c.min) << c.args[0];
    EXPECT_EQ(g.max_nodes, c.max) << c.args[0];
    EXPECT_EQ(g.gpus_per_node, c.gpus) << c.args[0];
  }
  SubmitGeometry g;
  ReadSubmitGeometry({"-N2-4"}, &g);
  EXPECT_EQ(g.nodes_flag, "--nodes=2-4");
}

}  // namespace
}  // namespace autopar
