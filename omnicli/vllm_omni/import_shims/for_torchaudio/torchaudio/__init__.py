"""Stand-in for `torchaudio` (see ../README.md): the mel filterbank and resampling; anything else is a
placeholder that raises when used."""

from _omnicli_missing import install_finder, module_getattr

from torchaudio import functional, transforms  # noqa: F401

__version__ = "0.0.0+omnicli.shim"
__getattr__ = module_getattr(__name__)
install_finder(__name__)
