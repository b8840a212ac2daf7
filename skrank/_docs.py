"""Docstrings that name shared texts by their keys in braces, ``{key}``."""


def filling(shared):
    """A decorator that writes the texts of ``shared`` into a function's docstring; other braces stay.

    Parameters
    ----------
    shared : dict of str to str
        The texts, by the keys the docstrings name.

    Returns
    -------
    callable
        ``fill(func)``, which returns ``func`` with its docstring filled in.
    """
    def fill(func):
        for key, text in shared.items():
            func.__doc__ = func.__doc__.replace("{" + key + "}", text)
        return func

    return fill
