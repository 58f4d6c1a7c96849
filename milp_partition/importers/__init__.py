"""Import models as graphs: PyTorch modules (:mod:`.torch_import`) and ONNX files (:mod:`.onnx_import`).

Both fill the same operator records (:mod:`.records`); :mod:`.build` groups them into operators
or layers, adds the backward pass of a training graph and times from a device profile.
PyTorch and ONNX are optional (extras ``torch`` and ``onnx``) and imported only when used.
"""

from milp_partition.importers.build import ImportedGraph, build_graph, write_imported
from milp_partition.importers.settings import ImportSettings

__all__ = ["ImportSettings", "ImportedGraph", "build_graph", "import_onnx", "import_torch", "write_imported"]


def import_torch(module, example_inputs, settings=None):  # type: ignore[no-untyped-def]
    """See :func:`milp_partition.importers.torch_import.import_torch`."""
    from milp_partition.importers.torch_import import import_torch as impl

    return impl(module, example_inputs, settings)


def import_onnx(path, settings=None, input_shapes=None):  # type: ignore[no-untyped-def]
    """See :func:`milp_partition.importers.onnx_import.import_onnx`."""
    from milp_partition.importers.onnx_import import import_onnx as impl

    return impl(path, settings, input_shapes)
