"""The full-AUC square loss: its class moments and its closed-form minimiser.

The pairwise square loss of Liu, Yuan, Ying and Yang (2020, "Stochastic AUC
maximization with deep neural networks", eq. (1)) of margin ``c`` with an
l2 penalty is a quadratic in ``w`` whose coefficients are the class means
and covariances, so that its minimiser solves
``(2 S + alpha I) w = 2 c dmu`` after one pass over the data.  The
derivation, with sample weights, is in the user guide,
:ref:`partial-auc-closed-form`.
"""


import numpy as np
import scipy.linalg
import scipy.sparse as sp

from ..backends.dispatch import is_external, make_design


def class_moments(X, sample_weight=None):
    """Column means and covariance (normalised by ``n``) of one class.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n, d)
        The rows of the class.
    sample_weight : ndarray of shape (n,), default=None
        Nonnegative weights of the rows (not all zero); None for unit weights.

    Returns
    -------
    mean : ndarray of shape (d,)
        ``sum_i p_i x_i`` with ``p_i = 1/n``, or ``v_i / sum v`` with weights.
    cov : ndarray of shape (d, d)
        ``sum_i p_i (x_i - mean)(x_i - mean)'``.  Dense input is centred
        first; sparse input is never densified beyond ``d x d``: the
        covariance is ``X' diag(p) X - mean mean'``, which loses about
        ``eps ||mean||^2`` absolute accuracy to cancellation (harmless
        unless the features' means dwarf their spreads).
    """
    n = X.shape[0]
    p = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64) / np.sum(sample_weight)
    if sp.issparse(X):
        X = X.astype(np.float64)
        if p is None:
            mean = np.asarray(X.mean(axis=0)).ravel()
            gram = (X.T @ X).toarray() / n
        else:
            mean = np.asarray(X.T @ p).ravel()
            gram = (X.T @ sp.diags(p) @ X).toarray()
        cov = gram - np.outer(mean, mean)
        return mean, 0.5 * (cov + cov.T)
    X = np.asarray(X, dtype=np.float64)
    if p is None:
        mean = X.mean(axis=0)
        centred = X - mean
        return mean, centred.T @ centred / n
    mean = p @ X
    centred = X - mean
    return mean, centred.T @ (centred * p[:, None])


def two_class_moments(X, positive, sample_weight=None):
    """:func:`class_moments` of the positive rows and of the others, without splitting an external ``X``.

    Parameters
    ----------
    X : {ndarray, sparse matrix, dask.array.Array, array-API array} of shape (n, d)
        The rows of both classes; a Dask array chunked by rows is read
        once, chunk by chunk
        (:meth:`skrank.backends.dask_design.DaskDesign.class_moments`), a
        CuPy array on its device.
    positive : ndarray of bool of shape (n,)
        True on the rows of the first class (the positives).
    sample_weight : ndarray of shape (n,), default=None
        The rows' weights: nonnegative, with a positive total in each
        class; None for unit weights.

    Returns
    -------
    (mean, cov) of the positive rows, (mean, cov) of the others
    """
    positive = np.asarray(positive, dtype=bool)
    if is_external(X):
        return make_design(X, False).class_moments(positive, sample_weight)
    v = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    return tuple(class_moments(X[rows], None if v is None else v[rows]) for rows in (positive, ~positive))


def system_of_moments(moments_pos, moments_neg, alpha, margin):
    """``(A, r)`` of the normal equations ``A w = r`` from the two classes' ``(mean, covariance)``."""
    (mu_pos, s_pos), (mu_neg, s_neg) = moments_pos, moments_neg
    dmu = mu_pos - mu_neg
    A = 2.0 * (s_pos + s_neg + np.outer(dmu, dmu))
    A[np.diag_indices_from(A)] += alpha
    return A, 2.0 * margin * dmu


def labelled_square_auc_system(X, y, alpha, margin, sample_weight=None):
    """The normal equations ``A w = r`` of the full-AUC square loss of the rows of ``X`` labelled ``y``.

    Parameters
    ----------
    X : {ndarray, sparse matrix, dask.array.Array} of shape (n, d)
        The data; a Dask array is read once, chunk by chunk, and never split
        (:func:`two_class_moments`).
    y : ndarray of shape (n,)
        Labels in {-1, +1}, both present.
    alpha : float
        Strength of the l2 penalty.
    margin : float
        The margin ``c``.
    sample_weight : ndarray of shape (n,), default=None
        Weights of the rows; None for unit weights.

    Returns
    -------
    A : ndarray of shape (d, d)
        ``2 (S+ + S- + dmu dmu') + alpha I``, the (constant) Hessian of ``F``.
    r : ndarray of shape (d,)
        ``2 c dmu``.
    """
    return system_of_moments(*two_class_moments(X, np.asarray(y) > 0, sample_weight), alpha, margin)


def _least_norm_solve(A, r):
    """``pinv(A) r`` for symmetric positive semidefinite ``A``.

    Eigenvalues below ``d * eps * lambda_max`` are treated as zero (the
    numerical rank of ``A``), as in ``numpy.linalg.pinv``.
    """
    lam, V = np.linalg.eigh(A)
    cutoff = max(A.shape[0], 1) * np.finfo(np.float64).eps * max(float(lam[-1]), 0.0)
    keep = lam > cutoff
    return V[:, keep] @ ((V[:, keep].T @ r) / lam[keep])


def solve_square_auc_system(A, r, alpha):
    """``w`` with ``A w = r`` and the method used (``"cholesky"`` or ``"least-norm"``).

    Cholesky when ``alpha > 0`` and it succeeds, otherwise the least-norm
    solution (:func:`_least_norm_solve`).
    """
    if alpha > 0:
        try:
            return scipy.linalg.cho_solve(scipy.linalg.cho_factor(A), r), "cholesky"
        except np.linalg.LinAlgError:
            pass
    return _least_norm_solve(A, r), "least-norm"


def square_auc_coef(X, y, alpha, margin=1.0, sample_weight=None):
    """The minimiser of the full-AUC square loss of the data ``(X, y)``.

    Used as a start by the ranking estimators: it ranks well and does not
    tie the scores as ``w = 0`` does.

    Parameters
    ----------
    X : {ndarray, sparse matrix, dask.array.Array} of shape (n, d)
    y : ndarray of shape (n,)
        Labels in {-1, +1}, both present.
    alpha, margin : float
    sample_weight : ndarray of shape (n,) or None, default=None
        Weights of the rows: the pairs are then drawn from the weighted
        classes.

    Returns
    -------
    ndarray of shape (d,)
    """
    A, r = labelled_square_auc_system(X, y, alpha, margin, sample_weight)
    return solve_square_auc_system(A, r, alpha)[0]


