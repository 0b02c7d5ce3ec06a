"""Stand-in for `torchvision` (see ../README.md): every attribute and submodule is a placeholder that
raises when used."""

from _omnicli_missing import install_finder, module_getattr

__version__ = "0.0.0+omnicli.shim"
__getattr__ = module_getattr(__name__)
install_finder(__name__)
