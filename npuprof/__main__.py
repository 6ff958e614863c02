import os
import sys


def _our_package() -> None:
    """`python -m npuprof` where the working directory holds a folder named npuprof (`-o npuprof`, a clone):
    Python takes it for a namespace package before an editable install's finder, and the package's own
    names are missing (helper-101). This file's package is loaded in its place."""
    if getattr(sys.modules.get("npuprof"), "__file__", None):
        return
    from importlib.util import module_from_spec, spec_from_file_location

    package_dir = os.path.dirname(os.path.abspath(__file__))
    spec = spec_from_file_location(
        "npuprof", os.path.join(package_dir, "__init__.py"), submodule_search_locations=[package_dir]
    )
    module = module_from_spec(spec)
    sys.modules["npuprof"] = module
    spec.loader.exec_module(module)


_our_package()

from npuprof.cli.main import main  # noqa: E402  (after the package is ours)

if __name__ == "__main__":
    main()
