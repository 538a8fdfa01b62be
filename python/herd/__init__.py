"""herd — the Python side of herd, on every rank's PYTHONPATH.

herd's agent carries this package inside its own binary and writes it, at
start, into a private directory of the user on each node (0700, checked),
which it puts first on the PYTHONPATH of every rank it starts: a training
script imports it with no set-up, on any node, with any transport.

    from herd import metrics      # metrics.log(step=..., loss=...)
    from herd import ckpt         # save and load through the memory tier
    from herd import elastic      # survivors keep training

Submodules are imported on demand; importing `herd` itself imports
nothing heavy (no torch), so any script may import it.  Every function
does nothing useful, and fails nothing, when the script is not run by
herd.
"""

__all__ = ["metrics", "ckpt", "elastic"]
