"""Models defined in code for tests, examples and benchmarks (no weights downloaded).

Each factory returns ``(module, example_inputs)`` so that ``milp-partition import torch
milp_partition.importers.models:gpt`` needs only ``--input-shape``; the CLI builds the
inputs from ``--input-shape`` and ignores the second element.  Widths and depths are
parameters so tests can use small ones.

Needs PyTorch (the ``torch`` extra).
"""

from __future__ import annotations

import math
from typing import Any

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


def convnet_small_test(channels: int = 16, blocks: int = 4, classes: int = 10) -> nn.Module:
    """A plain convolutional net for 3 x 32 x 32 images, for tests and benchmarks: a stem, ``blocks`` 3 x 3
    convolution + ReLU blocks (every other one strided, doubling the channels), average pooling and a classifier.

    No batch normalisation, so a pipeline's one-sample micro-batches compute what the whole batch does.
    """
    layers: list[nn.Module] = [nn.Sequential(nn.Conv2d(3, channels, 3, padding=1), nn.ReLU())]
    width = channels
    for b in range(blocks):
        out = width * 2 if b % 2 else width
        layers.append(nn.Sequential(nn.Conv2d(width, out, 3, stride=2 if b % 2 else 1, padding=1), nn.ReLU()))
        width = out
    layers += [nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten()), nn.Linear(width, classes)]
    return nn.Sequential(*layers)


def _make_divisible(value: float, divisor: int = 8) -> int:
    """Round channels to a multiple of ``divisor``, not below 90% of ``value`` (MobileNet's rule)."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def _conv_bn(
    c_in: int, c_out: int, kernel: int, stride: int = 1, groups: int = 1, act: type[nn.Module] | None = None
) -> nn.Sequential:
    layers: list[nn.Module] = [
        nn.Conv2d(c_in, c_out, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(c_out, eps=0.001, momentum=0.01),
    ]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class SqueezeExcite(nn.Module):
    """Squeeze-and-excitation: global average, 1x1 conv down, ReLU, 1x1 conv up, hard sigmoid, scale."""

    def __init__(self, channels: int, squeeze: int) -> None:
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = F.adaptive_avg_pool2d(x, 1)
        scale = F.hardsigmoid(self.fc2(F.relu(self.fc1(scale))))
        return x * scale


class InvertedResidual(nn.Module):
    """MobileNetV3's block: 1x1 expansion, depthwise k x k convolution, optional squeeze-excite, 1x1 projection."""

    def __init__(self, c_in: int, kernel: int, expanded: int, c_out: int, se: bool, act: type[nn.Module], stride: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        if expanded != c_in:
            layers.append(_conv_bn(c_in, expanded, 1, act=act))
        layers.append(_conv_bn(expanded, expanded, kernel, stride, groups=expanded, act=act))
        if se:
            layers.append(SqueezeExcite(expanded, _make_divisible(expanded // 4)))
        layers.append(_conv_bn(expanded, c_out, 1))
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and c_in == c_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.block(x)
        return out + x if self.residual else out


#: MobileNetV3-Large blocks: (input channels, kernel, expanded channels, output channels, squeeze-excite, hard swish, stride).
MOBILENET_V3_LARGE: tuple[tuple[int, int, int, int, bool, bool, int], ...] = (
    (16, 3, 16, 16, False, False, 1),
    (16, 3, 64, 24, False, False, 2),
    (24, 3, 72, 24, False, False, 1),
    (24, 5, 72, 40, True, False, 2),
    (40, 5, 120, 40, True, False, 1),
    (40, 5, 120, 40, True, False, 1),
    (40, 3, 240, 80, False, True, 2),
    (80, 3, 200, 80, False, True, 1),
    (80, 3, 184, 80, False, True, 1),
    (80, 3, 184, 80, False, True, 1),
    (80, 3, 480, 112, True, True, 1),
    (112, 3, 672, 112, True, True, 1),
    (112, 5, 672, 160, True, True, 2),
    (160, 5, 960, 160, True, True, 1),
    (160, 5, 960, 160, True, True, 1),
)


class MobileNetV3(nn.Module):
    """MobileNetV3-Large (Howard et al. 2019) written out: the layout of torchvision's ``mobilenet_v3_large``.

    ``width`` scales every channel count (rounded to multiples of 8); ``width=1`` has 5.48 M parameters.
    """

    def __init__(self, width: float = 1.0, classes: int = 1000, last_channel: int = 1280) -> None:
        super().__init__()

        def ch(c: int) -> int:
            return _make_divisible(c * width)

        layers: list[nn.Module] = [_conv_bn(3, ch(16), 3, 2, act=nn.Hardswish)]
        for c_in, kernel, expanded, c_out, se, hswish, stride in MOBILENET_V3_LARGE:
            act = nn.Hardswish if hswish else nn.ReLU
            layers.append(InvertedResidual(ch(c_in), kernel, ch(expanded), ch(c_out), se, act, stride))
        last_conv = 6 * ch(160)
        layers.append(_conv_bn(ch(160), last_conv, 1, act=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(last_conv, last_channel), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(last_channel, classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def mobilenet_v3_large(width: float = 1.0, classes: int = 1000) -> nn.Module:
    """MobileNetV3-Large (5.48 M parameters at width 1); input 3 x 224 x 224."""
    return MobileNetV3(width, classes)


def mobilenet_v3_small_test() -> nn.Module:
    """MobileNetV3-Large's layout at width 0.25 with 10 classes and a 64-wide head, for tests."""
    return MobileNetV3(0.25, classes=10, last_channel=64)


class ScaledGELUFunction(torch.autograd.Function):
    """A custom autograd function: ``gelu(x) * scale`` whose backward is written by hand.

    Its backward computes the exact GELU derivative with an extra matrix product against an
    identity (as a fused kernel with a different backward would), so its backward FLOPs differ
    from what autograd derives from the traced forward.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, eye: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(x, eye)
        return F.gelu(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        x, eye = ctx.saved_tensors
        cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
        pdf = torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        return (grad * (cdf + x * pdf)) @ eye, None


class CustomFunctionMLP(nn.Module):
    """Two linear layers around :class:`ScaledGELUFunction` (a model with a custom autograd function)."""

    eye: torch.Tensor

    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, width)
        self.fc2 = nn.Linear(width, width)
        self.register_buffer("eye", torch.eye(width), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(ScaledGELUFunction.apply(self.fc1(x), self.eye))


class GroupedConvNet(nn.Module):
    """Grouped and depthwise convolutions (ResNeXt and MobileNet style) with a pointwise mix and a classifier."""

    def __init__(self, channels: int = 32, groups: int = 4, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.grouped = nn.Conv2d(channels, channels, 3, padding=1, groups=groups)
        self.depthwise = nn.Conv2d(channels, channels, 5, padding=2, groups=channels)
        self.pointwise = nn.Conv2d(channels, 2 * channels, 1)
        self.transposed = nn.ConvTranspose2d(2 * channels, channels, 2, stride=2, groups=groups)
        self.fc = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.stem(x))
        x = F.relu(self.pointwise(self.depthwise(F.relu(self.grouped(x)))))
        x = self.transposed(x)
        return self.fc(x.mean(dim=(2, 3)))


def transformer_encoder(d_model: int = 64, heads: int = 4, layers: int = 2, ffn: int = 128) -> nn.Module:
    """torch's own ``nn.TransformerEncoder`` (batch first) of ``layers`` post-norm layers."""
    layer = nn.TransformerEncoderLayer(d_model, heads, ffn, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


def mlp_heldout_test() -> nn.Module:
    """Held back from tuning the run objective (``benchmarks/plan_fidelity.py``): a wider, deeper MLP than
    :func:`mlp_small_test` with GELU: 6 blocks of width 96 on 48 inputs, 10 classes."""
    mods: list[nn.Module] = []
    width = 48
    for _ in range(6):
        mods += [nn.Sequential(nn.Linear(width, 96), nn.GELU())]
        width = 96
    mods.append(nn.Linear(width, 10))
    return nn.Sequential(*mods)


def encoder_heldout_test() -> nn.Module:
    """Held back from tuning the run objective (``benchmarks/plan_fidelity.py``): torch's own
    ``nn.TransformerEncoder`` (4 post-norm layers of width 64, 4 heads, feed-forward 192) on float sequences."""
    return transformer_encoder(d_model=64, heads=4, layers=4, ffn=192)


def gpt_joint_example(d_model: int = 4096, layers: int = 32, heads: int = 32, max_len: int = 2048) -> nn.Module:
    """A GPT-3-6.7B-shaped decoder (32 layers, width 4096, 32 heads, vocabulary 50304) built on the meta device.

    The README's joint-planning example: it does not fit on one 80 GB device with Adam state, so
    the plan must split it.  Built on PyTorch's meta device (shapes only, no memory for its
    6.9 billion parameters); import it with the default ``--execute-on meta``.  The vocabulary is GPT-2's 50257
    padded to a multiple of 128 (as Megatron-LM and nanoGPT do), so the LM head splits over 2, 4 and 8 devices.
    """
    with torch.device("meta"):
        return GPT(vocab=50304, d_model=d_model, layers=layers, heads=heads, max_len=max_len)
