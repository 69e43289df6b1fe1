"""Two small blocks with the view patterns real models are made of, for `check` and the tests:

* `patch_embed`: the ViT patch embedding (convolution → flatten → transpose), whose flatten of a
  channels-last output must stay a copy on its own while the whole chain is the NHWC bytes;
* `gpt_attention`: a GPT-style attention block (layer norm, qkv projection split into heads,
  transposes, scaled masked softmax attention, output projection, residual).

Use as `viewlower.models:patch_embed` / `viewlower.models:gpt_attention`.
"""
from __future__ import annotations

import torch
from torch import nn


class PatchEmbed(nn.Module):
    def __init__(self, channels: int = 3, dim: int = 48, patch: int = 8):
        super().__init__()
        self.proj = nn.Conv2d(channels, dim, kernel_size=patch, stride=patch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2) * 1.0


class GPTAttention(nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4, context: int = 8):
        super().__init__()
        self.heads = heads
        self.ln = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("mask", torch.tril(torch.ones(context, context, dtype=torch.bool)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln(x)).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (c // self.heads) ** 0.5)
        att = att.masked_fill(~self.mask[:t, :t], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return x + self.proj(y)


def patch_embed(**kwargs: int) -> nn.Module:
    return PatchEmbed(**kwargs)


def gpt_attention(**kwargs: int) -> nn.Module:
    return GPTAttention(**kwargs)
