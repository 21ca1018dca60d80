"""The shared training loop's schedule (``training/loop.py``: ``train``): with
``--max-steps`` the warm-up + cosine spans exactly those steps however slow each step is,
and the wall-clock budget only stops a run early; without it the schedule follows the
steps the budget allows. The clock is faked, so nothing here depends on the machine."""

from __future__ import annotations

import argparse
import math

import pytest
import torch

from specdec_core.training import loop

ADAMW = torch.optim.AdamW


def _run(monkeypatch, step_s: float, max_steps: int | None, minutes: float):
    """Train a 4-parameter model on a fake clock advancing ``step_s`` per step; returns
    (the learning rate of every optimizer step, the loop's result)."""
    clock = iter(range(10**6))
    monkeypatch.setattr(loop.time, "perf_counter", lambda: next(clock) * step_s)
    lrs: list[float] = []

    class Recording(ADAMW):
        def step(self, closure=None):
            lrs.append(self.param_groups[0]["lr"])
            return super().step(closure)

    monkeypatch.setattr(loop.torch.optim, "AdamW", Recording)
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 2)
    args = argparse.Namespace(lr=1e-2, batch=2, context=4, max_steps=max_steps)
    data = torch.arange(64)

    def loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return model(x[:, :2].float()).pow(2).mean()

    return lrs, loop.train("t", model, loss, data, args, minutes, seed=0)


def test_fixed_steps_give_the_same_schedule_at_any_speed(monkeypatch):
    fast, run_fast = _run(monkeypatch, step_s=0.01, max_steps=120, minutes=120)
    slow, run_slow = _run(monkeypatch, step_s=30.0, max_steps=120, minutes=120)
    assert run_fast["steps"] == run_slow["steps"] == 120 and fast == slow
    warmup = 12  # 10 % of the steps (at most loop.WARMUP_STEPS)
    assert fast[warmup - 1] == pytest.approx(1e-2) and fast[0] == pytest.approx(1e-2 / warmup)
    tail = 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (119 - warmup) / (120 - warmup)))
    assert fast[-1] == pytest.approx(1e-2 * tail)


def test_the_budget_only_cuts_a_fixed_run_short(monkeypatch, capsys):
    full, _ = _run(monkeypatch, step_s=0.01, max_steps=120, minutes=120)
    cut, run = _run(monkeypatch, step_s=60.0, max_steps=120, minutes=30)
    assert run["steps"] == len(cut) < 120 and cut == full[: len(cut)]
    assert f"budget stopped it at {len(cut)}/120 steps" in capsys.readouterr().out


def test_without_max_steps_the_schedule_follows_the_budget(monkeypatch):
    lrs, run = _run(monkeypatch, step_s=60.0, max_steps=None, minutes=60)
    assert 55 <= run["steps"] <= 61
    assert lrs[-1] < 0.2e-2  # the cosine ran (nearly) to its 10 % floor within the budget
