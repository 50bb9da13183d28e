#!/usr/bin/env python3
"""Regenerates the comparison tables of docs/planner.md from the `autopar plan` CLI.

usage: python3 docs/planner_tables.py BUILD_DIR/cli/autopar > /tmp/tables.md

For every published training run below it runs the planner twice: pinned to the published
layout (what the model predicts for what they ran) and free (what the planner would choose on
the same GPUs and batch). Then the seed's fixed rule against the planner. Standard library only.
"""
import json
import os
import subprocess
import sys
import tempfile

# Architecture numbers Narayanan et al.'s FLOP formulas need: (hidden, layers, vocab).
ARCH = {
    "megatron-22b": (6144, 48, 51200),
    "gpt3-175b": (12288, 96, 50257),
    "megatron-145b": (12288, 80, 51200),
    "megatron-310b": (16384, 96, 51200),
    "mt-nlg-530b": (20480, 105, 51200),
    "megatron-1t": (25600, 128, 51200),
    "bloom-176b": (14336, 70, 250880),
    "opt-175b": (12288, 96, 50272),
}
# The smaller GPTs of Narayanan et al. 2021, Table 1 (no preset): name -> (layers, hidden, heads).
N21_GPTS = {"1.7B": (24, 2304, 24), "3.6B": (30, 3072, 32), "7.5B": (36, 4096, 32),
            "18.4B": (40, 6144, 48), "39.1B": (48, 8192, 64), "76.1B": (60, 10240, 80)}
MODEL_DIR = tempfile.mkdtemp(prefix="planner_tables_")


def gpt_file(name):
    """A JSON model file for one of N21_GPTS (GPT style: vocabulary 51,200, ffn 4h)."""
    layers, hidden, heads = N21_GPTS[name]
    path = os.path.join(MODEL_DIR, f"gpt-{name}.json")
    with open(path, "w") as f:
        json.dump({"name": f"gpt-{name}", "layers": layers, "hidden": hidden, "heads": heads,
                   "vocab": 51200, "seq_len": 2048, "tied_embeddings": True,
                   "learned_pos_emb": True, "bias": True}, f)
    ARCH[path] = (hidden, layers, 51200)
    return path

PEAK = {"a100-80gb": 312.0, "a100-40gb": 312.0, "h100-80gb": 989.0, "h200-141gb": 989.0}


def hfu_to_mfu(model, seq, tflops, gpu):
    """Published TFLOP/s counted with full recompute (Narayanan et al. 2021 eq. 3:
    96*B*s*l*h^2*(1 + s/6h + V/16lh)) -> model FLOPs utilization (72*B*s*l*h^2*(1 + s/6h + V/12lh))."""
    h, l, v = ARCH[model]
    hardware = 96 * (1 + seq / (6 * h) + v / (16 * l * h))
    useful = 72 * (1 + seq / (6 * h) + v / (12 * l * h))
    return tflops * useful / hardware / PEAK[gpu]


# Published runs. "metric": ("mfu", x) as published, ("hfu_tflops", x) = TFLOP/s counted with
# full recompute, ("tflops", x) = TFLOP/s as published with an unstated FLOP convention.
RUNS = [
    dict(name="Megatron 22B (Korthikanti+ 2022)", year=2022, model="megatron-22b", gpus=8, gpu="a100-80gb",
         batch=4, seq=2048, tp=8, pp=1, dp=1, extra=["--recompute", "selective"],
         metric=("mfu", 0.415), src="[K22], MFU: Megatron-LM README table"),
    dict(name="GPT-3 175B (Korthikanti+ 2022)", year=2022, model="gpt3-175b", gpus=64, gpu="a100-80gb",
         batch=64, seq=2048, tp=8, pp=8, dp=1, extra=["--recompute", "selective"],
         metric=("mfu", 0.514), src="[K22], MFU: Megatron-LM README table"),
    dict(name="MT-NLG 530B arch. (Korthikanti+ 2022)", year=2022, model="mt-nlg-530b", gpus=280, gpu="a100-80gb",
         batch=280, seq=2048, tp=8, pp=35, dp=1, extra=["--recompute", "selective"],
         metric=("mfu", 0.560), src="[K22], MFU: Megatron-LM README table"),
    dict(name="Megatron 1T (Korthikanti+ 2022)", year=2022, model="megatron-1t", gpus=512, gpu="a100-80gb",
         batch=512, seq=2048, tp=8, pp=64, dp=1, extra=["--recompute", "selective"],
         metric=("mfu", 0.563), src="[K22], MFU: Megatron-LM README table"),
    *[dict(name=f"MT-NLG 530B arch., 8-way data parallel (Korthikanti+ 2022)", year=2022, model="mt-nlg-530b",
           gpus=2240, gpu="a100-80gb", batch=2240, seq=2048, tp=8, pp=35, dp=8,
           extra=["--recompute", rc, "--micro-batch", "1", "--vpp", "3", "--dp-comm-overlap", "off"]
           + (["--recompute-layers", "0"] if rc == "full" else []),
           metric=("mfu", mfu), src=f"[K22] {where}")
      for rc, mfu, where in [("selective", 0.542, "§6.3"), ("full", 0.421, "abstract (full recompute)")]],
    # Narayanan et al.'s Table 1 with the micro-batch, interleaving and DDP of Megatron-LM's
    # reproduction script (examples/sc21/run_table_1.sh): DDP=torch overlaps the gradient
    # all-reduce with the backward pass, DDP=local does not.
    *[dict(name=f"{label} {n} (Narayanan+ 2021)",
           year=2021, model=f or gpt_file(n), gpus=g, gpu="a100-80gb",
           batch=b, seq=2048, tp=t, pp=pp, dp=g // (t * pp),
           extra=["--recompute", "full", "--recompute-layers", "0", "--micro-batch", str(mb),
                  "--vpp", str(v), "--dp-comm-overlap", "on" if torch_ddp else "off"],
           metric=("hfu_tflops", tf), src="[N21] Table 1, [N21s]")
      for label, n, f, t, pp, g, b, mb, v, torch_ddp, tf in [
          ("GPT", "1.7B", None, 1, 1, 32, 512, 16, 1, True, 137.0),
          ("GPT", "3.6B", None, 2, 1, 64, 512, 16, 1, True, 138.0),
          ("GPT", "7.5B", None, 4, 1, 128, 512, 16, 1, True, 142.0),
          ("GPT", "18.4B", None, 8, 1, 256, 1024, 8, 1, True, 135.0),
          ("GPT", "39.1B", None, 8, 2, 512, 1536, 4, 1, False, 138.0),
          ("GPT", "76.1B", None, 8, 4, 1024, 1792, 2, 3, False, 140.0),
          ("Megatron", "145.6B", "megatron-145b", 8, 8, 1536, 2304, 2, 2, False, 148.0),
          ("Megatron", "310.1B", "megatron-310b", 8, 16, 1920, 2160, 1, 2, False, 155.0),
          ("Megatron", "1T", "megatron-1t", 8, 64, 3072, 3072, 1, 1, False, 163.0)]],
    dict(name="MT-NLG 530B (Smith+ 2022)", year=2022, model="mt-nlg-530b", gpus=2240, gpu="a100-80gb",
         batch=1920, seq=2048, tp=8, pp=35, dp=8,
         extra=["--recompute", "full", "--recompute-layers", "0", "--dp-comm-overlap", "off"],
         metric=("hfu_tflops", 126.0), src="[S22] §2.4"),
    dict(name="BLOOM-176B (BigScience 2022)", year=2022, model="bloom-176b", gpus=384, gpu="a100-80gb",
         batch=2048, seq=2048, tp=4, pp=12, dp=8,
         extra=["--net-gbps", "6.25", "--optimizer-sharding", "on", "--micro-batch", "2",
                "--recompute", "full", "--recompute-layers", "0", "--dp-comm-overlap", "off"],
         metric=("hfu_tflops", 150.0), src="[B22]"),
    dict(name="OPT-175B (Zhang+ 2022)", year=2022, model="opt-175b", gpus=992, gpu="a100-80gb",
         batch=992, seq=2048, tp=8, pp=1, dp=124,
         extra=["--fsdp", "124", "--recompute", "full", "--recompute-layers", "0"],
         metric=("hfu_tflops", 147.0), src="[Z22]", note="(FSDP)"),
    dict(name="Llama-2-70B (Touvron+ 2023)", model="llama-2-70b", gpus=2048, gpu="a100-80gb",
         batch=1024, seq=4096, tp=None, pp=None, dp=None, extra=[],
         metric=("derived_mfu", 0.43), src="[T23]", gpus_note=" (assumed)"),
    dict(name="Llama-3-405B (Llama Team 2024)", model="llama-3-405b", gpus=8192, gpu="h100-80gb",
         batch=2048, seq=8192, tp=8, pp=16, dp=64, extra=[],
         metric=("tflops_mfu", 430.0, 0.43), src="[L24] Table 4"),
    dict(name="Llama-3-405B (Llama Team 2024)", model="llama-3-405b", gpus=16384, gpu="h100-80gb",
         batch=2048, seq=8192, tp=8, pp=16, dp=128, extra=[],
         metric=("tflops_mfu", 400.0, 0.41), src="[L24] Table 4"),
    dict(name="Llama-3-405B, 128K context (Llama Team 2024)", model="llama-3-405b", gpus=16384,
         gpu="h100-80gb", batch=128, seq=131072, tp=8, cp=16, pp=16, dp=8, extra=[],
         metric=("tflops_mfu", 380.0, 0.38), src="[L24] Table 4"),
    *[dict(name=f"{m} FSDP2 (torchtitan)", model=m, gpus=64, gpu="a100-80gb", batch=64 * b, seq=seq,
           tp=1, pp=1, dp=64, extra=["--fsdp", "64", "--micro-batch", str(b), "--recompute", rc]
           + (["--recompute-layers", "0"] if rc == "full" else []),
           metric=("tokens_per_gpu", tok, tok * mflops), src="[TT24]", note="(FSDP)")
      for m, seq, b, rc, tok, mflops in [
          ("llama-3-8b", 8192, 1, "selective", 2973.0, 57.9e-3),
          ("llama-3-70b", 8192, 1, "full", 331.0, 481.7e-3),
          ("llama-2-70b", 4096, 2, "full", 353.0, 444.6e-3)]],
    dict(name="gpt-oss-120b, MoE (NVIDIA NeMo 25.11)", model="gpt-oss-120b", gpus=64, gpu="h100-80gb",
         batch=512, seq=4096, tp=1, ep=8, pp=4, dp=16, extra=["--micro-batch", "4", "--vpp", "1"],
         metric=("tokens_per_gpu", 5630.0, 153.0), src="[NM25] DGX-H100 table"),
]

SEED_CASES = [
    ("gpt3-1.3b", 8, "a100-80gb", 512, 2048),
    ("llama-2-7b", 8, "a100-80gb", 512, 4096),
    ("llama-2-7b", 64, "a100-80gb", 1024, 4096),
    ("llama-3-8b", 16, "h100-80gb", 512, 8192),
    ("llama-2-13b", 32, "a100-80gb", 512, 4096),
    ("megatron-22b", 64, "a100-80gb", 512, 2048),
    ("llama-2-70b", 64, "h100-80gb", 512, 4096),
    ("llama-2-70b", 512, "a100-80gb", 1024, 4096),
    ("gpt3-175b", 1024, "a100-80gb", 1536, 2048),
]


def plan(autopar, model, gpus, gpu, batch, seq, extra):
    cmd = [autopar, "plan", "--model", model, "--gpus", str(gpus), "--gpu-type", gpu,
           "--global-batch", str(batch), "--seq-len", str(seq), "--top", "0", "--json"] + extra
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip().replace("autopar plan: ", "")
    return json.loads(p.stdout), None


def sizes(r):
    """t8 c16 p16 d8: the sizes of a run or a plan (c and e only when used)."""
    s = f"t{r['tp']}"
    if r.get("cp", 1) > 1:
        s += f" c{r['cp']}"
    if r.get("ep", 1) > 1:
        s += f" e{r['ep']}"
    return s + f" p{r['pp']} d{r['dp']}"


def layout(j):
    s = f"{sizes(j)}, mb {j['micro_batch']}, {j['recompute']}"
    if j["recompute_layers"]:
        s += f" ({j['recompute_layers']}/chunk)"
    if j["vpp"] > 1:
        s += f", v{j['vpp']}"
    if j.get("grad_sharding"):
        s += ", ZeRO-2"
    elif j["optimizer_sharding"]:
        s += ", ZeRO-1"
    shard, replicas = j.get("fsdp_shard", 0), j.get("fsdp_replicate", 0)
    if shard:
        s += f", FSDP {shard}" if replicas == 1 else f", HSDP {shard}x{replicas}"
    return s


def published(run):
    kind, value = run["metric"][:2]
    if kind == "tokens_per_gpu":
        return f"{value:,.0f} tokens/s/GPU ({run['metric'][2]:.0f} model TFLOP/s)"
    if kind == "derived_mfu":
        return f"MFU ≈ {value * 100:.0f}% (derived)"
    if kind == "tflops_mfu":
        return f"{value:.0f} TFLOP/s, MFU {run['metric'][2] * 100:.0f}%"
    if kind == "mfu":
        return f"MFU {value * 100:.1f}%"
    if kind == "hfu_tflops":
        mfu = hfu_to_mfu(run["model"], run["seq"], value, run["gpu"])
        return f"{value:.0f} TFLOP/s (with recompute) = MFU {mfu * 100:.1f}%"
    return f"{value:.0f} TFLOP/s (~{value / PEAK[run['gpu']] * 100:.0f}% of peak)"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    autopar = sys.argv[1]
    print("| run (source) | GPUs, batch | published layout | published throughput | planner on the published layout | planner's choice | planner's predicted MFU |")
    print("|---|---|---|---|---|---|---|")
    for r in RUNS:
        pins = []
        if r["tp"]:
            pins = ["--tp", str(r["tp"]), "--pp", str(r["pp"]), "--dp", str(r["dp"])]
            for key in ("cp", "ep"):
                if r.get(key):
                    pins += [f"--{key}", str(r[key])]
        pub_layout = sizes(r) if r["tp"] else "not published"
        if r.get("note"):
            pub_layout += " " + r["note"]
        if pins:
            # Runs of 2021-2022 predate Megatron's --tp-comm-overlap and flash attention:
            # evaluated without the overlap and with unfused attention.
            old = (["--tp-comm-overlap", "off", "--attention", "unfused"]
                   if r.get("year", 2024) < 2023 else [])
            j, err = plan(autopar, r["model"], r["gpus"], r["gpu"], r["batch"], r["seq"],
                          pins + r["extra"] + old)
            on_pub = (f"MFU {j['mfu'] * 100:.1f}%, {j['mem_per_gpu_gib']:.0f} GiB ({layout(j)})"
                      if j else "refused: " + err.split(": ", 1)[-1])
            if j and r["metric"][0] == "tokens_per_gpu":
                on_pub = f"{j['tokens_per_s'] / r['gpus']:,.0f} tokens/s/GPU, " + on_pub
        else:
            on_pub = "-"
        free_extra = []
        if "--net-gbps" in r["extra"]:
            i = r["extra"].index("--net-gbps")
            free_extra += r["extra"][i:i + 2]
        j, err = plan(autopar, r["model"], r["gpus"], r["gpu"], r["batch"], r["seq"], free_extra)
        choice = f"{layout(j)}; {j['mem_per_gpu_gib']:.0f} GiB" if j else f"refused: {err}"
        mfu = f"{j['mfu'] * 100:.1f}%" if j else "-"
        if j and r["metric"][0] == "tokens_per_gpu":
            mfu += f" ({j['tokens_per_s'] / r['gpus']:,.0f} tokens/s/GPU)"
        print(f"| {r['name']} {r['src']} | {r['gpus']}{r.get('gpus_note', '')} x {r['gpu']}, {r['batch']} x {r['seq']} | "
              f"{pub_layout} | {published(r)} | {on_pub} | {choice} | {mfu} |")
    print()
    print("| model | GPUs, batch | seed rule (mp = tp, dp fills the GPUs) | seed layout: predicted | planner's choice | planner: predicted | speed-up |")
    print("|---|---|---|---|---|---|---|")
    for model, gpus, gpu, batch, seq in SEED_CASES:
        j, err = plan(autopar, model, gpus, gpu, batch, seq, [])
        params = j["params"] if j else 0
        if not j:
            print(f"| {model} | {gpus} x {gpu} | - | - | refused: {err} | - | - |")
            continue
        mp = 2 if params < 10e9 else 4 if params < 50e9 else 8
        seed_dp = gpus // mp
        s, serr = plan(autopar, model, gpus, gpu, batch, seq, ["--tp", str(mp), "--cp", "1", "--pp", "1"])
        seed_txt = f"mp{mp} dp{seed_dp} (the rule: dp{ {2: 4, 4: 2, 8: 1}[mp] })"
        if s:
            seed_pred = f"{s['tokens_per_s']:,.0f} tok/s, MFU {s['mfu'] * 100:.1f}% ({layout(s)})"
            speedup = f"{s['step_time_s'] / j['step_time_s']:.2f}x"
        else:
            seed_pred = serr.split(": ", 1)[-1]
            speedup = "runs vs OOM"
        print(f"| {model} | {gpus} x {gpu}, {batch} x {seq} | {seed_txt} | {seed_pred} | {layout(j)} | "
              f"{j['tokens_per_s']:,.0f} tok/s, MFU {j['mfu'] * 100:.1f}% | {speedup} |")


if __name__ == "__main__":
    main()
