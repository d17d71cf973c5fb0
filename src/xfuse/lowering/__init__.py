"""From bufferized kernels to native code: the passes below `ew-bufferize`, one per module.

The symbol names the lowering gives the functions the runtime calls are here, where the runtime
reads them without importing the passes (and xDSL).
"""


def packed_entry_name(name: str) -> str:
    """The symbol of `name`'s packed entry (see `xfuse.lowering.to_llvm.packed_entry`)."""
    return f"{name}.packed"


def workspace_size_function(name: str) -> str:
    """The name of the companion that returns the workspace bytes function `name` needs."""
    return f"{name}_workspace_bytes"
