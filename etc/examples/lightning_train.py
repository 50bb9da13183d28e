#!/usr/bin/env python3
"""A PyTorch Lightning run as its users write one, under autopar: Trainer(strategy="ddp") on CPU
(gloo), a small classifier on data this program makes, a checkpoint at every epoch's end. Lightning
finds its ranks from what autopar-launch sets (its TorchElasticEnvironment), not from SLURM_*.
autopar's part: AutoparCheckpoint in place of ModelCheckpoint, AutoparCheckpointIO, and the
resume path (autopar.lightning, docs/ecosystem.md). Without autopar it trains the same.

    python3 lightning_train.py OUT_DIR [--epochs N]

Rank 0 writes OUT_DIR/final.json at the end: the last epoch's loss, a SHA-256 of every parameter,
and which cluster environment Lightning chose. tests/ecosystem/test_lightning.py kills a rank of it
and compares with a fault-free run."""
import argparse
import hashlib
import json
import os

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from autopar.lightning import AutoparCheckpoint, AutoparCheckpointIO, resume_path, trainer_layout


class Classifier(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                       torch.nn.ReLU(), torch.nn.Linear(256, 8))
        self.last_loss = float("nan")

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.net(x), y)
        self.last_loss = float(loss.detach())
        return loss

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=3e-3)
        return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)}


def data() -> TensorDataset:
    g = torch.Generator().manual_seed(7)
    x = torch.randn(640, 32, generator=g)
    w = torch.randn(32, 8, generator=g)
    return TensorDataset(x, (x @ w).argmax(dim=1))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--epochs", type=int, default=8)
    a = p.parse_args()
    pl.seed_everything(0, workers=True)
    model = Classifier()
    trainer = pl.Trainer(
        strategy="ddp", accelerator="cpu", **trainer_layout(), max_epochs=a.epochs,
        callbacks=[AutoparCheckpoint(dirpath=os.path.join(a.out, "checkpoints"), every_n_epochs=1)],
        plugins=[AutoparCheckpointIO()], logger=False, enable_progress_bar=False,
        enable_model_summary=False, deterministic=True)
    resume = resume_path()
    print(f"lightning_train: rank {trainer.global_rank} of {trainer.world_size} "
          f"({type(trainer.strategy.cluster_environment).__name__}), resume from {resume}", flush=True)
    trainer.fit(model, DataLoader(data(), batch_size=16, shuffle=True), ckpt_path=resume, weights_only=True)
    if trainer.is_global_zero:
        digest = hashlib.sha256()
        for name, t in sorted(model.state_dict().items()):
            digest.update(name.encode())
            digest.update(t.detach().contiguous().view(torch.uint8).numpy().tobytes())
        with open(os.path.join(a.out, "final.json"), "w") as f:
            json.dump({"params_sha256": digest.hexdigest(), "last_loss": model.last_loss,
                       "epochs": trainer.current_epoch, "steps": trainer.global_step, "resumed_from": resume,
                       "environment": type(trainer.strategy.cluster_environment).__name__}, f)
        print(f"lightning_train: done, {trainer.global_step} steps, last loss {model.last_loss:.5f}", flush=True)


if __name__ == "__main__":
    main()
