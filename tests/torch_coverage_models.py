"""Small PyTorch modules that compute their loss inside `forward`, for the import-coverage tests (torch only;
import lazily): a MobileNetV2 inverted residual, a squeeze-excite block with hardswish, a GPT-2-style causal
attention block whose mask is built with masked_fill, and a U-Net block (GroupNorm, upsampling, skip concat)."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as Fn


class InvertedResidual(nn.Module):
    """MobileNetV2's block (expand 1x1, depthwise 3x3, project 1x1; ReLU6; residual), a linear head and the
    cross-entropy loss."""

    def __init__(self, c: int = 4, expand: int = 3, classes: int = 3) -> None:
        super().__init__()
        h = c * expand
        self.expand = nn.Sequential(nn.Conv2d(c, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU6())
        self.depthwise = nn.Sequential(nn.Conv2d(h, h, 3, padding=1, groups=h, bias=False), nn.BatchNorm2d(h),
                                       nn.ReLU6())
        self.project = nn.Sequential(nn.Conv2d(h, c, 1, bias=False), nn.BatchNorm2d(c))
        self.fc = nn.Linear(c, classes)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = x + self.project(self.depthwise(self.expand(x)))
        return Fn.cross_entropy(self.fc(h.mean((2, 3))), y)


class SqueezeExcite(nn.Module):
    """MobileNetV3's squeeze-excite after a hardswish convolution, then cross-entropy. The gate is written
    relu6(x + 3) / 6 (as many MobileNetV3 copies write h_sigmoid): torch's own hardsigmoid backward multiplies by
    1/6 rounded to float32 even in float64, which a float64 comparison at 1e-8 would catch as an error."""

    def __init__(self, c: int = 6, squeeze: int = 3, classes: int = 3) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, c, 3, padding=1)
        self.act = nn.Hardswish()
        self.fc1 = nn.Conv2d(c, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, c, 1)
        self.head = nn.Linear(c, classes)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = self.act(self.conv(x))
        gate = Fn.relu6(self.fc2(Fn.relu(self.fc1(Fn.adaptive_avg_pool2d(h, 1)))) + 3.0) / 6.0
        return Fn.cross_entropy(self.head((h * gate).mean((2, 3))), y)


class CausalSelfAttention(nn.Module):
    """GPT-2's attention (as nanoGPT writes it): the causal mask is built in forward and applied by masked_fill;
    then a linear head on the mean over positions and cross-entropy."""

    def __init__(self, d: int = 8, heads: int = 2, classes: int = 3) -> None:
        super().__init__()
        self.heads = heads
        self.ln = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.head = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        mask = torch.tril(torch.ones(t, t, dtype=x.dtype)).view(1, 1, t, t)
        att = Fn.softmax(att.masked_fill(mask == 0, float("-inf")), dim=-1)
        h = x + self.proj((att @ v).transpose(1, 2).contiguous().view(b, t, d))
        return Fn.cross_entropy(self.head(h.mean(1)), y)


class UNetBlock(nn.Module):
    """One U-Net level: conv + GroupNorm + SiLU, pool down, conv, upsample (nearest or bilinear), concat the
    skip, conv + GroupNorm; mean squared error against a target. mode "transposed" upsamples with a learned
    ConvTranspose2d instead."""

    def __init__(self, c: int = 4, mode: str = "nearest") -> None:
        super().__init__()
        self.mode = mode
        self.down = nn.Sequential(nn.Conv2d(2, c, 3, padding=1), nn.GroupNorm(2, c), nn.SiLU())
        self.mid = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.GroupNorm(2, c), nn.ReLU())
        self.up = nn.Sequential(nn.Conv2d(2 * c, 2, 3, padding=1), nn.GroupNorm(1, 2))
        if mode == "transposed":
            self.upsample = nn.ConvTranspose2d(c, c, 2, stride=2)

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        skip = self.down(x)
        h = self.mid(Fn.max_pool2d(skip, 2))
        if self.mode == "transposed":
            h = self.upsample(h)
        elif self.mode == "nearest":
            h = Fn.interpolate(h, scale_factor=2, mode="nearest")
        else:
            h = Fn.interpolate(h, scale_factor=2, mode="bilinear", align_corners=False)
        return Fn.mse_loss(self.up(torch.cat([h, skip], dim=1)), target)
