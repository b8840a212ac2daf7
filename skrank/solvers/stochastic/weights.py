"""The risk's weights by rank, for NumPy code and for the compiled kernels.

* :func:`rank_weights`: the weights of a loss vector's ranks (``lam[argsort(l)] =
  sigma``), for any risk, value-dependent ones included;
* :func:`weight_pieces`: the same rule in a form Numba kernels can apply to a
  mini-batch (two weight sequences and a loss threshold).
"""

import numpy as np


def rank_weights(risk, losses, out=None):
    """Weights by rank: ``lam[argsort(losses)] = sigma`` (ties broken stably)."""
    n = losses.shape[0]
    order = np.argsort(losses, kind="stable")
    if risk.depends_on_values:
        sigma = risk.weights(n, losses)
    else:
        sigma = risk.weights(n)
    lam = np.empty(n) if out is None else out
    lam[order] = sigma
    return lam


def weight_pieces(risk, n):
    """``(sigma_a, sigma_b, threshold)``: the rank weights of ``n`` losses for kernels.

    The ``r``-th smallest loss gets ``sigma_a[r]`` when it is at most
    ``threshold`` and ``sigma_b[r]`` otherwise.  For a risk whose weights
    depend only on ``n`` both sequences are ``risk.weights(n)`` and the
    threshold is infinite; for the human-aligned risk they are its two CPT
    pieces and its reference point, so that the result equals
    ``risk.weights(n, losses)``.
    """
    if risk.depends_on_values:
        sigma_a, sigma_b = risk.weight_pieces(n)
        return (np.ascontiguousarray(sigma_a, dtype=np.float64),
                np.ascontiguousarray(sigma_b, dtype=np.float64), float(risk.reference))
    sigma = np.ascontiguousarray(risk.weights(n), dtype=np.float64)
    return sigma, sigma, np.inf
