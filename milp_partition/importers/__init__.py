"""Import models as graphs: PyTorch modules (:mod:`.torch_import`) and ONNX files (:mod:`.onnx_import`).

Both fill the same operator records (:mod:`.records`); :mod:`.build` groups them into operators
or layers, adds the backward pass of a training graph and times from a device profile.
PyTorch and ONNX are optional (extras ``torch`` and ``onnx``): the modules here import them only when used.
"""

from milp_partition.importers.build import ImportedGraph, build_graph, write_imported
from milp_partition.importers.onnx_import import import_onnx
from milp_partition.importers.settings import ImportSettings
from milp_partition.importers.torch_import import import_torch

__all__ = ["ImportSettings", "ImportedGraph", "build_graph", "import_onnx", "import_torch", "write_imported"]
