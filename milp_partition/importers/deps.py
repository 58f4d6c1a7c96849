"""Optional dependencies: import them with a message naming the extra to install."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import MappingProxyType, ModuleType

from milp_partition.errors import InputError

#: Extra of ``pyproject.toml`` that provides each optional module.
EXTRAS: Mapping[str, str] = MappingProxyType({"torch": "torch", "onnx": "onnx", "onnxscript": "onnx", "transformers": "zoo"})


def require(module: str) -> ModuleType:
    """Import ``module`` or raise :class:`InputError` telling which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        extra = EXTRAS.get(module.split(".")[0], module)
        raise InputError(f"{module} is not installed ({exc}); install it with: pip install 'milp-partition[{extra}]'") from None
