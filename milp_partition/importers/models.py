"""Models defined in code for tests, examples and benchmarks (no weights downloaded).

Each factory returns ``(module, example_inputs)`` so that ``milp-partition import torch
milp_partition.importers.models:gpt`` needs only ``--input-shape``; the CLI builds the
inputs from ``--input-shape`` and ignores the second element.  Widths and depths are
parameters so tests can use small ones.

Needs PyTorch (the ``torch`` extra).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


def mlp(in_features: int = 784, hidden: int = 1024, layers: int = 4, classes: int = 10) -> nn.Module:
    """A multi-layer perceptron: ``layers`` Linear+ReLU blocks and a classifier."""
    mods: list[nn.Module] = []
    width = in_features
    for _ in range(layers):
        mods += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    mods.append(nn.Linear(width, classes))
    return nn.Sequential(*mods)


class Bottleneck(nn.Module):
    """The ResNet-50 bottleneck block: 1x1, 3x3, 1x1 convolutions with batch norm and a shortcut."""

    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int = 1) -> None:
        super().__init__()
        out_channels = width * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False), nn.BatchNorm2d(out_channels)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + identity)


class ResNet(nn.Module):
    """A ResNet with bottleneck blocks; ``resnet50()`` has ResNet-50's layout (3, 4, 6, 3 blocks)."""

    def __init__(self, blocks: tuple[int, ...] = (3, 4, 6, 3), base_width: int = 64, classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, base_width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(base_width)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        in_channels = base_width
        stages = []
        for i, count in enumerate(blocks):
            width = base_width * 2**i
            layer = []
            for j in range(count):
                layer.append(Bottleneck(in_channels, width, stride=2 if (j == 0 and i > 0) else 1))
                in_channels = width * Bottleneck.expansion
            stages.append(nn.Sequential(*layer))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet50(base_width: int = 64, classes: int = 1000) -> nn.Module:
    """ResNet-50's layout (3, 4, 6, 3 bottleneck blocks); ``base_width=64`` is the real width."""
    return ResNet((3, 4, 6, 3), base_width=base_width, classes=classes)


class CausalSelfAttention(nn.Module):
    """GPT-2 style multi-head causal self-attention written with matmul and softmax."""

    mask: torch.Tensor

    def __init__(self, d_model: int, heads: int, max_len: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.reshape(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.reshape(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.reshape(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.heads))
        att = att.masked_fill(~self.mask[:t, :t], float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, c)
        return self.proj(y)


class Block(nn.Module):
    """A pre-norm transformer block: attention and a 4x MLP with GELU, each with a residual."""

    def __init__(self, d_model: int, heads: int, max_len: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, heads, max_len)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.out = nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """A GPT-style decoder: token and position embeddings, ``layers`` blocks, final norm, LM head.

    Input: token ids of shape (batch, sequence) and dtype int64.
    """

    def __init__(self, vocab: int = 50257, d_model: int = 768, layers: int = 12, heads: int = 12, max_len: int = 1024) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(max_len, d_model)
        self.h = nn.ModuleList([Block(d_model, heads, max_len) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def gpt(vocab: int = 50257, d_model: int = 768, layers: int = 12, heads: int = 12, max_len: int = 1024) -> nn.Module:
    """A 12-layer GPT-2-small-sized decoder by default (124 M parameters with an untied head: 163 M)."""
    return GPT(vocab, d_model, layers, heads, max_len)


def gpt_small_test() -> nn.Module:
    """A 12-layer GPT with small widths, for tests and the README example (vocab 1000, width 128)."""
    return GPT(vocab=1000, d_model=128, layers=12, heads=4, max_len=128)


def resnet50_small_test() -> nn.Module:
    """ResNet-50's layout with base width 8 and 10 classes, for tests."""
    return resnet50(base_width=8, classes=10)


def mlp_small_test() -> nn.Module:
    """A 4-layer MLP of width 64 on 32 inputs, for tests."""
    return mlp(in_features=32, hidden=64, layers=4, classes=10)
