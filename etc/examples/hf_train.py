#!/usr/bin/env python3
"""A Hugging Face `transformers.Trainer` run as its users write one, under autopar: a small causal
language model built from a config (Llama architecture, random weights, about 3.3 million
parameters; nothing from a hub), trained on a character corpus this program makes, DDP over gloo
on CPU. autopar's part is two lines: the callback and the resume directory (autopar.hf,
docs/ecosystem.md). Without autopar (no --ckpt-dir) it trains the same, with Trainer's own saves.

    python3 hf_train.py OUT_DIR [--steps N] [--save-steps K]

The README's demo (etc/examples/train.sbatch) trains it on 4 nodes x 2 ranks;
tests/ecosystem/test_hf_trainer.py kills a rank of it and compares with a fault-free run.

Rank 0 writes OUT_DIR/final.json at the end: the final loss, and a SHA-256 of every parameter."""
import argparse
import hashlib
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments  # noqa: E402

from autopar.hf import AutoparCallback, resume_checkpoint  # noqa: E402

SEQ = 64


class Corpus(torch.utils.data.Dataset):
    """Blocks of SEQ bytes of a text made from a fixed seed (a vocabulary of the 256 byte values)."""

    def __init__(self, blocks: int) -> None:
        g = torch.Generator().manual_seed(1234)
        words = ["slurm", "node", "rank", "gradient", "checkpoint", "the", "a", "of", "model",
                 "train", "step", "loss", "batch", "token", "restart", "allreduce"]
        picks = torch.randint(len(words), (blocks * SEQ,), generator=g).tolist()
        text = " ".join(words[i] for i in picks).encode()
        self.data = torch.tensor(list(text[:blocks * SEQ]), dtype=torch.long).view(blocks, SEQ)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.data[i], "labels": self.data[i]}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--save-steps", type=int, default=6)
    a = p.parse_args()
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=SEQ)
    model = LlamaForCausalLM(config)
    args = TrainingArguments(
        output_dir=os.path.join(a.out, "trainer"), max_steps=a.steps, save_steps=a.save_steps,
        save_total_limit=2, per_device_train_batch_size=4, learning_rate=1e-3, warmup_steps=2,
        logging_steps=1, use_cpu=True, ddp_backend="gloo", report_to=[], seed=0, data_seed=0,
        dataloader_num_workers=0, disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=Corpus(256), callbacks=[AutoparCallback()])
    resume = resume_checkpoint(args)
    print(f"hf_train: rank {args.process_index} of {args.world_size}, resume from {resume}", flush=True)
    result = trainer.train(resume_from_checkpoint=resume)
    if args.process_index == 0:
        digest = hashlib.sha256()
        for name, t in sorted(trainer.model.state_dict().items()):
            digest.update(name.encode())
            digest.update(t.detach().contiguous().view(torch.uint8).numpy().tobytes())
        losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
        with open(os.path.join(a.out, "final.json"), "w") as f:
            json.dump({"params_sha256": digest.hexdigest(), "last_loss": losses[-1],
                       "train_loss": result.training_loss, "steps": trainer.state.global_step,
                       "resumed_from": resume}, f)
        print(f"hf_train: done, {trainer.state.global_step} steps, last loss {losses[-1]:.5f}", flush=True)


if __name__ == "__main__":
    main()
