"""The block drafter's training layout (training/block_loss.py), read as a table: a window
of T = 4 tokens, blocks of B = 3 (two masks per cut), cuts at t = 0 and t = 2."""

from __future__ import annotations

import torch

from specdec_core.training.block_loss import block_layout


def test_block_layout_masks_see_their_prefix_and_their_own_group_only():
    allowed, positions, mask_ids, p_index = block_layout(4, [0, 2], 3, mask_id=99)
    seen = [row.nonzero().flatten().tolist() for row in allowed]
    assert seen == [
        [0],  # the window: causal
        [0, 1],
        [0, 1, 2],
        [0, 1, 2, 3],
        [0, 4],  # cut t = 0, mask 1: x_0 and itself
        [0, 4, 5],  # cut t = 0, mask 2: x_0 and the group's earlier mask
        [0, 1, 2, 6],  # cut t = 2, mask 1: x_0..x_2, never the first group
        [0, 1, 2, 6, 7],
    ]
    assert positions.tolist() == [0, 1, 2, 3, 1, 2, 3, 4]  # mask j of cut t sits at t + j
    assert p_index.tolist() == [1, 2, 3, 4]  # the window position each mask row must match
    assert mask_ids.tolist() == [99] * 4 and mask_ids.dtype == torch.long
