"""The modules of a package read from their files, for the tests that scan skrank's imports.

Nothing is imported: the tests read the syntax trees.
"""


def module_names(root):
    """Dotted module name of each ``.py`` file under the package directory ``root``, and its path."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def package_of(name, path):
    """The package a module's relative imports start from: itself for an ``__init__.py``."""
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def import_source(node, package):
    """The dotted module an ``ImportFrom`` node reads from, relative imports resolved."""
    if not node.level:
        return node.module
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))
