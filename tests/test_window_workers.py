"""A time window opens in the training process only: a DataLoader worker (spawned: it imports torch and
wakes npuprof's agent too) records nothing and ends as it would without npuprof (a real run)."""

from __future__ import annotations

from pathlib import Path

from conftest import capture_record, rank_dirs, run_script

JOB = """
import os, time, torch
from torch.utils.data import DataLoader, TensorDataset

if __name__ == "__main__":
    data = TensorDataset(torch.randn(64, 16), torch.randn(64, 4))
    loader = DataLoader(data, batch_size=8, num_workers=1, multiprocessing_context="spawn",
                        persistent_workers=True)
    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    print(os.getpid(), flush=True)
    end = time.monotonic() + 3.5
    while time.monotonic() < end:
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
            time.sleep(0.02)
"""


def test_a_time_window_records_the_training_process_not_its_dataloader_worker(tmp_path: Path) -> None:
    result, out = run_script(tmp_path, JOB, "--delay", "1.5", "--duration", "0.5")
    assert result.returncode == 0, result.stderr
    assert "Exception ignored" not in result.stderr, result.stderr
    pid = result.stdout.split()[0]
    (rank_dir,) = rank_dirs(out)
    assert f"_{pid}_" in rank_dir.name, rank_dir.name
    assert capture_record(rank_dir)["status"] == "complete"
