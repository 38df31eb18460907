"""Whole models of the PyTorch zoo, small, each computing its loss inside `forward` (torch only; import lazily):
MobileNetV2, MobileNetV3-Small, EfficientNet-B0, a two-level U-Net, ViT-B/16's structure and a GPT-2 LM.

MobileNetV2, MobileNetV3, EfficientNet and VisionTransformer follow torchvision's `torchvision/models/`
(BSD-3-Clause) in structure and module names (features.N.block..., classifier, conv_proj, encoder.layers...),
written here from its published architecture because the torchvision wheel this project can install does not
load against CI's CPU torch (see tests/torch_models.py). Only the stage tables are shortened (fewer, thinner
stages) so a float64 import and gradient check at 32x32 stays cheap; every kind of layer each net uses is kept.
The GPT-2 LM follows GPT-2's block (pre-norm, causal attention masked by masked_fill, tanh-GELU MLP, dropout)
without weight tying. Every dropout is an nn.Dropout module, so a test can give torch the mask accelsim drew.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as Fn


def _make_divisible(v: float, divisor: int = 8) -> int:
    """torchvision's channel rounding: to a multiple of `divisor`, never below 90% of `v`."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


class Conv2dNormActivation(nn.Sequential):
    """conv (no bias) + BatchNorm + activation, padding keeping the size at stride 1 (torchvision.ops.misc)."""

    def __init__(self, cin: int, cout: int, kernel_size: int = 3, stride: int = 1, groups: int = 1,
                 activation_layer: Callable[..., nn.Module] | None = nn.ReLU) -> None:
        layers: list[nn.Module] = [nn.Conv2d(cin, cout, kernel_size, stride, (kernel_size - 1) // 2, groups=groups,
                                             bias=False), nn.BatchNorm2d(cout)]
        if activation_layer is not None:
            layers.append(activation_layer())
        super().__init__(*layers)


class Hardsigmoid(nn.Module):
    """relu6(x + 3) / 6, torch's hardsigmoid written out: torch's own hardsigmoid backward multiplies by 1/6
    rounded to float32 even in float64 (tests/torch_coverage_models.py), which a float64 check would flag."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return Fn.relu6(x + 3.0) / 6.0


class SqueezeExcitation(nn.Module):
    """torchvision.ops.SqueezeExcitation: avgpool, fc1, activation, fc2, scale activation, multiply."""

    def __init__(self, channels: int, squeeze: int, activation: Callable[..., nn.Module] = nn.ReLU,
                 scale_activation: Callable[..., nn.Module] = nn.Sigmoid) -> None:
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.activation = activation()
        self.scale_activation = scale_activation()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))


# ---- MobileNetV2 -----------------------------------------------------------------------------------------

class InvertedResidual(nn.Module):
    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        hidden = int(round(inp * expand_ratio))
        self.use_res_connect = stride == 1 and inp == oup
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(Conv2dNormActivation(inp, hidden, 1, activation_layer=nn.ReLU6))
        layers += [Conv2dNormActivation(hidden, hidden, 3, stride, groups=hidden, activation_layer=nn.ReLU6),
                   nn.Conv2d(hidden, oup, 1, bias=False), nn.BatchNorm2d(oup)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    """torchvision's MobileNetV2 (features, classifier = Dropout + Linear), stage table (t, c, n, s) shortened
    to two of its seven stages (one block without expansion, two with, the second residual)."""

    SETTING = ((1, 16, 1, 1), (6, 24, 2, 2))

    def __init__(self, num_classes: int = 10, width_mult: float = 0.25, last_channel: int = 64,
                 dropout: float = 0.2) -> None:
        super().__init__()
        cin = _make_divisible(32 * width_mult)
        features: list[nn.Module] = [Conv2dNormActivation(3, cin, stride=2, activation_layer=nn.ReLU6)]
        for t, c, n, s in self.SETTING:
            cout = _make_divisible(c * width_mult)
            for i in range(n):
                features.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        features.append(Conv2dNormActivation(cin, last_channel, 1, activation_layer=nn.ReLU6))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout), nn.Linear(last_channel, num_classes))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = Fn.adaptive_avg_pool2d(self.features(x), (1, 1))
        return Fn.cross_entropy(self.classifier(torch.flatten(h, 1)), y)


# ---- MobileNetV3 -----------------------------------------------------------------------------------------

class InvertedResidualV3(nn.Module):
    """MobileNetV3's block: expand, depthwise, squeeze-excite (hardsigmoid gate), project; ReLU or hardswish."""

    def __init__(self, cin: int, kernel: int, expanded: int, cout: int, use_se: bool, use_hs: bool,
                 stride: int) -> None:
        super().__init__()
        self.use_res_connect = stride == 1 and cin == cout
        act = nn.Hardswish if use_hs else nn.ReLU
        layers: list[nn.Module] = []
        if expanded != cin:
            layers.append(Conv2dNormActivation(cin, expanded, 1, activation_layer=act))
        layers.append(Conv2dNormActivation(expanded, expanded, kernel, stride, groups=expanded, activation_layer=act))
        if use_se:
            layers.append(SqueezeExcitation(expanded, _make_divisible(expanded // 4), scale_activation=Hardsigmoid))
        layers.append(Conv2dNormActivation(expanded, cout, 1, activation_layer=None))
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x) if self.use_res_connect else self.block(x)


class MobileNetV3(nn.Module):
    """torchvision's mobilenet_v3_small (first conv 16 hardswish, bneck table, last conv 6x, classifier Linear,
    Hardswish, Dropout, Linear), its bneck table (kernel, expanded, out, SE, HS, stride) cut to three rows
    (the third, residual, with its 5x5 kernel, squeeze-excite and hardswish)."""

    SETTING = ((3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2), (5, 88, 24, True, True, 1))

    def __init__(self, num_classes: int = 10, last_channel: int = 64, dropout: float = 0.2) -> None:
        super().__init__()
        features: list[nn.Module] = [Conv2dNormActivation(3, 16, stride=2, activation_layer=nn.Hardswish)]
        cin = 16
        for kernel, expanded, cout, se, hs, stride in self.SETTING:
            features.append(InvertedResidualV3(cin, kernel, expanded, cout, se, hs, stride))
            cin = cout
        features.append(Conv2dNormActivation(cin, 6 * cin, 1, activation_layer=nn.Hardswish))
        self.features = nn.Sequential(*features)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(6 * cin, last_channel), nn.Hardswish(), nn.Dropout(p=dropout),
                                        nn.Linear(last_channel, num_classes))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = torch.flatten(self.avgpool(self.features(x)), 1)
        return Fn.cross_entropy(self.classifier(h), y)


# ---- EfficientNet-B0 -------------------------------------------------------------------------------------

class StochasticDepth(nn.Module):
    """torchvision.ops.StochasticDepth ("row"): drops whole samples at random in training; p = 0 keeps all,
    which is what the CI comparison uses (a random per-sample drop would differ between torch and accelsim)."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = torch.empty((x.shape[0],) + (1,) * (x.ndim - 1), dtype=x.dtype).bernoulli_(1.0 - self.p)
        return x * keep / (1.0 - self.p)


class MBConv(nn.Module):
    """EfficientNet's MBConv: expand (SiLU), depthwise (SiLU), squeeze-excite (SiLU, sigmoid), project,
    stochastic depth on the residual."""

    def __init__(self, expand_ratio: int, kernel: int, stride: int, cin: int, cout: int, sd_prob: float) -> None:
        super().__init__()
        self.use_res_connect = stride == 1 and cin == cout
        expanded = _make_divisible(cin * expand_ratio)
        layers: list[nn.Module] = []
        if expanded != cin:
            layers.append(Conv2dNormActivation(cin, expanded, 1, activation_layer=nn.SiLU))
        layers += [Conv2dNormActivation(expanded, expanded, kernel, stride, groups=expanded, activation_layer=nn.SiLU),
                   SqueezeExcitation(expanded, max(1, cin // 4), activation=nn.SiLU),
                   Conv2dNormActivation(expanded, cout, 1, activation_layer=None)]
        self.block = nn.Sequential(*layers)
        self.stochastic_depth = StochasticDepth(sd_prob)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.block(x)
        return x + self.stochastic_depth(h) if self.use_res_connect else h


class EfficientNet(nn.Module):
    """torchvision's efficientnet_b0 (stem 32, MBConv stages (expand, kernel, stride, in, out, layers), head
    conv 4x, avgpool, classifier Dropout + Linear), its stage table cut to two of seven stages at width 0.5."""

    SETTING = ((1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2))

    def __init__(self, num_classes: int = 10, width_mult: float = 0.5, stochastic_depth_prob: float = 0.0,
                 dropout: float = 0.2) -> None:
        super().__init__()
        w = (lambda c: _make_divisible(c * width_mult))
        layers: list[nn.Module] = [Conv2dNormActivation(3, w(32), stride=2, activation_layer=nn.SiLU)]
        total, done = sum(s[5] for s in self.SETTING), 0
        for expand, kernel, stride, cin, cout, n in self.SETTING:
            stage = []
            for i in range(n):
                stage.append(MBConv(expand, kernel, stride if i == 0 else 1, w(cin) if i == 0 else w(cout), w(cout),
                                    stochastic_depth_prob * done / total))
                done += 1
            layers.append(nn.Sequential(*stage))
        last = w(self.SETTING[-1][4])
        layers.append(Conv2dNormActivation(last, 4 * last, 1, activation_layer=nn.SiLU))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout, inplace=True), nn.Linear(4 * last, num_classes))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = torch.flatten(self.avgpool(self.features(x)), 1)
        return Fn.cross_entropy(self.classifier(h), y)


# ---- U-Net -----------------------------------------------------------------------------------------------

class DoubleConv(nn.Sequential):
    """U-Net's (conv 3x3, BatchNorm, ReLU) twice."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                         nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class UNet(nn.Module):
    """Ronneberger et al.'s U-Net with two levels: encoder (DoubleConv, max pool), bottleneck, decoder (2x2
    up-convolution, concat the skip, DoubleConv), 1x1 output conv; MSE loss against a target image."""

    def __init__(self, cin: int = 3, cout: int = 2, base: int = 4) -> None:
        super().__init__()
        self.inc = DoubleConv(cin, base)
        self.down1 = DoubleConv(base, 2 * base)
        self.down2 = DoubleConv(2 * base, 4 * base)
        self.up2 = nn.ConvTranspose2d(4 * base, 2 * base, 2, stride=2)
        self.conv2 = DoubleConv(4 * base, 2 * base)
        self.up1 = nn.ConvTranspose2d(2 * base, base, 2, stride=2)
        self.conv1 = DoubleConv(2 * base, base)
        self.outc = nn.Conv2d(base, cout, 1)

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        x1 = self.inc(x)
        x2 = self.down1(Fn.max_pool2d(x1, 2))
        x3 = self.down2(Fn.max_pool2d(x2, 2))
        h = self.conv2(torch.cat([x2, self.up2(x3)], dim=1))
        h = self.conv1(torch.cat([x1, self.up1(h)], dim=1))
        return Fn.mse_loss(self.outc(h), target)


# ---- ViT-B/16 --------------------------------------------------------------------------------------------

class MLPBlock(nn.Sequential):
    def __init__(self, dim: int, mlp_dim: int, dropout: float) -> None:
        super().__init__(nn.Linear(dim, mlp_dim), nn.GELU(), nn.Dropout(dropout), nn.Linear(mlp_dim, dim),
                         nn.Dropout(dropout))


class EncoderBlock(nn.Module):
    """Pre-norm transformer block (ln_1, self_attention, dropout, ln_2, mlp) as torchvision's ViT has it."""

    def __init__(self, heads: int, dim: int, mlp_dim: int, dropout: float) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim, eps=1e-6)
        self.self_attention = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.ln_2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = MLPBlock(dim, mlp_dim, dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln_1(x)
        h, _ = self.self_attention(h, h, h, need_weights=False)
        x = x + self.dropout(h)
        return x + self.mlp(self.ln_2(x))


class Encoder(nn.Module):
    def __init__(self, seq_length: int, layers: int, heads: int, dim: int, mlp_dim: int, dropout: float) -> None:
        super().__init__()
        self.pos_embedding = nn.Parameter(torch.empty(1, seq_length, dim).normal_(std=0.02))
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.Sequential(*(EncoderBlock(heads, dim, mlp_dim, dropout) for _ in range(layers)))
        self.ln = nn.LayerNorm(dim, eps=1e-6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(self.layers(self.dropout(x + self.pos_embedding)))


class VisionTransformer(nn.Module):
    """torchvision's VisionTransformer (conv_proj patches, class_token, encoder, heads.head) with ViT-B/16's
    structure at a small size: image 32, patch 16 by default, two layers, width 16, two heads."""

    def __init__(self, image_size: int = 32, patch_size: int = 16, num_layers: int = 2, num_heads: int = 2,
                 hidden_dim: int = 16, mlp_dim: int = 32, num_classes: int = 10, dropout: float = 0.1) -> None:
        super().__init__()
        self.patch_size, self.hidden_dim = patch_size, hidden_dim
        self.conv_proj = nn.Conv2d(3, hidden_dim, patch_size, stride=patch_size)
        self.class_token = nn.Parameter(torch.zeros(1, 1, hidden_dim))
        seq = (image_size // patch_size) ** 2 + 1
        self.encoder = Encoder(seq, num_layers, num_heads, hidden_dim, mlp_dim, dropout)
        self.heads = nn.Sequential()
        self.heads.add_module("head", nn.Linear(hidden_dim, num_classes))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        h = self.conv_proj(x).reshape(n, self.hidden_dim, -1).permute(0, 2, 1)
        h = torch.cat([self.class_token.expand(n, -1, -1), h], dim=1)
        return Fn.cross_entropy(self.heads(self.encoder(h)[:, 0]), y)


# ---- GPT-2 -----------------------------------------------------------------------------------------------

class CausalSelfAttention(nn.Module):
    """GPT-2's attention as nanoGPT writes it: c_attn, a tril buffer applied with masked_fill, c_proj."""

    def __init__(self, dim: int, heads: int, block_size: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size,
                                                                                        block_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        att = self.attn_dropout(Fn.softmax(att, dim=-1))
        h = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
        return self.resid_dropout(self.c_proj(h))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, block_size: int, dropout: float) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, block_size, dropout)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential()
        self.mlp.add_module("c_fc", nn.Linear(dim, 4 * dim))
        self.mlp.add_module("gelu", nn.GELU(approximate="tanh"))
        self.mlp.add_module("c_proj", nn.Linear(4 * dim, dim))
        self.mlp.add_module("dropout", nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """A GPT-2 language model (wte, wpe, drop, blocks h.N, ln_f, lm_head; no weight tying) whose forward
    takes token ids and next-token targets and returns the LM loss (cross-entropy over every position)."""

    def __init__(self, vocab: int = 16, block_size: int = 8, layers: int = 1, heads: int = 2, dim: int = 8,
                 dropout: float = 0.1) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(block_size, dim)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList(Block(dim, heads, block_size, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.drop(self.wte(idx) + self.wpe(torch.arange(t)))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return Fn.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
