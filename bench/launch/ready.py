import time; T_READY = time.time()  # noqa: E702 -- the first line: the moment the program runs
"""Program of the time-to-ready benchmark (bench/launch/time_to_ready.py).

Records when it started (first line, before any import) and, with --pg, when it holds an
initialized torch.distributed process group (gloo). Writes "RANK T_READY T_PG" to
OUT_DIR/rank-RANK. Its environment (RANK, WORLD_SIZE, MASTER_ADDR, ...) comes from autopar-launch
or from torchrun.
"""
import os
import sys


def main():
    out_dir, with_pg = sys.argv[1], "--pg" in sys.argv[2:]
    rank = os.environ["RANK"]
    t_pg = 0.0
    if with_pg:
        import torch.distributed as dist
        dist.init_process_group("gloo")
        t_pg = time.time()
        dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank-{rank}"), "w") as f:
        f.write(f"{rank} {T_READY:.6f} {t_pg:.6f}\n")


main()
